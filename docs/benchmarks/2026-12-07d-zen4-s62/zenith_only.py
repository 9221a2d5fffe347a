"""A training step (batch 8; a torchvision CNN at SIZE px, or train_ab's bert / gpt2 / llama
at SIZE tokens) in a process that runs only Zenith, as a user's would: median ms over STEPS steps after 3 warm-up ones, and the page faults a step
(ru_minflt). Run builds in alternating processes (PYTHONPATH=<a build>) to compare them;
in a process that ran eager PyTorch first, glibc's raised mmap threshold hides the
faults. With ENGINE eager the process runs only eager PyTorch instead (a user's view of
both: eager's allocator faults too). Usage: zenith_only.py MODEL STEPS [SIZE [ENGINE]]."""
import resource
import statistics as st
import sys
import time

import os

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-07a-zen4-s59"))
import train_ab  # noqa: E402

import zenith  # noqa: E402


def main():
    name, steps = sys.argv[1], int(sys.argv[2])
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 112
    eager = len(sys.argv) > 4 and sys.argv[4] == "eager"
    torch.manual_seed(0)
    m, x, loss_of = train_ab.model_and_inputs(name, 8, size)
    m.train()
    c = m if eager else torch.compile(m, backend="zenith")

    def step():
        m.zero_grad(set_to_none=True)
        loss_of(c(x)).backward()

    for _ in range(3):
        step()
    t, faults = [], []
    for _ in range(steps):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        step()
        t.append(time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    who = "eager" if eager else f"zenith at {zenith.__file__.rsplit('/', 2)[0]}"
    print(f"{name} b8 {size}, {who}: {st.median(t) * 1e3:.1f} ms a step, "
          f"{st.median(faults):.0f} page faults a step")


if __name__ == "__main__":
    main()
