"""A torchvision CNN's training step (batch 8) in a process that runs only Zenith, as a
user's would: median ms over STEPS steps after 3 warm-up ones, and the page faults a step
(ru_minflt). Run builds in alternating processes (PYTHONPATH=<a build>) to compare them;
in a process that ran eager PyTorch first, glibc's raised mmap threshold hides the
faults. Usage: zenith_only.py MODEL STEPS [SIZE]."""
import resource
import statistics as st
import sys
import time

import torch
import torchvision

import zenith


def main():
    name, steps = sys.argv[1], int(sys.argv[2])
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 112
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(num_classes=1000).train()
    x = torch.randn(8, 3, size, size)
    c = torch.compile(m, backend="zenith")

    def step():
        m.zero_grad(set_to_none=True)
        c(x).pow(2).mean().backward()

    for _ in range(3):
        step()
    t, faults = [], []
    for _ in range(steps):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        step()
        t.append(time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    print(f"{name} b8 {size}px, zenith at {zenith.__file__.rsplit('/', 2)[0]}: {st.median(t) * 1e3:.1f} ms a step, "
          f"{st.median(faults):.0f} page faults a step")


if __name__ == "__main__":
    main()
