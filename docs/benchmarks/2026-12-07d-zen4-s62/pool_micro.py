"""ResNet's max pooling as a training graph runs it (max_pool2d_with_indices, 3x3 stride 2
padding 1, batch 8, 64 channels): the compiled forward (Zenith, this build) against eager
PyTorch's, in one process, calls alternating; median us of each and their ratio per round.
Usage: pool_micro.py [SIZE ROUNDS] (SIZE: the pool's input map, 56 at 224 px)."""
import statistics as st
import sys
import time

import torch
import torch.nn.functional as F

import zenith


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 56
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    x = torch.randn(8, 64, size, size).relu().requires_grad_()  # a ReLU's output: ties at 0

    def f(t):
        return F.max_pool2d(t, 3, 2, 1)

    c = torch.compile(f, backend="zenith")
    want, got = f(x), c(x)
    assert torch.equal(want, got)
    gw, = torch.autograd.grad(want.sum(), x)
    gg, = torch.autograd.grad(c(x).sum(), x)
    assert torch.equal(gw, gg), "gradients routed differently (indices differ)"
    t = {"eager": [], "zenith": []}
    for _ in range(rounds):
        for k, fn in (("eager", f), ("zenith", c)):
            t0 = time.perf_counter()
            fn(x)
            t[k].append(time.perf_counter() - t0)
    r = sorted(b / a for a, b in zip(t["eager"], t["zenith"]))
    print(f"max_pool2d 3x3 s2 p1 on (8, 64, {size}, {size}) with indices, forward, {torch.get_num_threads()} threads:"
          f" eager {st.median(t['eager']) * 1e6:.0f} us, zenith {st.median(t['zenith']) * 1e6:.0f} us,"
          f" zenith / eager per round {st.median(r):.3f} [{r[len(r) // 4]:.3f}, {r[3 * len(r) // 4]:.3f}]")


if __name__ == "__main__":
    main()
