"""A torchvision CNN's training step (batch 8) in one process: eager against Zenith,
rounds alternating, the per-round ratio Zenith / eager, median [p25, p75]. Run it with
two builds of Zenith in turn (PYTHONPATH=<an older build> for the other) to compare
them through eager. Usage: train_vs_eager.py MODEL ROUNDS [BATCH SIZE]."""
import os
import statistics as st
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-07a-zen4-s59"))
import train_ab  # noqa: E402

import zenith  # noqa: E402


def main():
    name, rounds = sys.argv[1], int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 112
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(num_classes=1000).train()
    for mod in m.modules():  # (dropout's masks are PyTorch's either way)
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    x = torch.randn(batch, 3, size, size)
    step = train_ab.stepper(x, lambda o: o.pow(2).mean())
    want = step((m, m))
    import copy
    c = copy.deepcopy(m)
    runs = {"eager": (m, m), "zenith": (c, train_ab.compiled(c))}
    got = step(runs["zenith"])
    assert abs(got - want) <= 1e-4 * abs(want) + 1e-6, (got, want)
    t = train_ab.interleave(runs, step, rounds)
    print(f"{name} b{batch} {size}px zenith at {os.path.dirname(zenith.__file__)}: eager "
          f"{st.median(t['eager']) * 1e3:.1f} ms, zenith {st.median(t['zenith']) * 1e3:.1f} ms, "
          f"zenith / eager {train_ab.ratio(t['zenith'], t['eager'])}")


if __name__ == "__main__":
    main()
