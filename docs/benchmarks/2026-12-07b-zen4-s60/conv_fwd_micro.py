"""A 3x3 conv's forward with its filters as an input (as in a training forward), PyTorch
(oneDNN) against Zenith (torch.compile), batch 8, padding 1: median of 20 calls after 3."""
import statistics as st
import time

import torch

import zenith  # noqa: F401  (registers the backend)


def bench(f, n=20):
    for _ in range(3):
        f()
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return st.median(t) * 1e3


for (N, C, OC, H) in [(8, 256, 256, 7), (8, 512, 512, 7), (8, 512, 512, 4), (8, 256, 256, 14)]:
    x, w = torch.randn(N, C, H, H), torch.randn(OC, C, 3, 3)
    f = lambda x, w: torch.nn.functional.conv2d(x, w, padding=1)  # noqa: E731
    torch._dynamo.reset()
    c = torch.compile(f, backend="zenith")
    torch.testing.assert_close(c(x, w), f(x, w), rtol=1e-3, atol=1e-2)
    print(f"N{N} C{C} {H}x{H}: forward torch {bench(lambda: f(x, w)):6.2f}  zenith (filters an input) "
          f"{bench(lambda: c(x, w)):6.2f}")
