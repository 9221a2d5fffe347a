"""Training step of a torchvision CNN in one process: eager, Zenith with a conv's
non-constant filters read unpacked (ZENITH_PACK_PER_CALL=0 when its executables were
built: the state before), and Zenith packing them once per call; rounds alternate the
three. Usage: pack_ab.py MODEL ROUNDS [BATCH SIZE]. Prints median ms and per-round ratios."""
import copy
import os
import statistics as st
import sys
import time

import torch
import torchvision


def compiled(mod):
    """mod compiled through a wrapper with a code object of its own: Dynamo caches graphs
    per code object and, with nn.Modules inlined, a second deep copy of one model would
    reuse the first copy's compiled graph (its parameters are graph inputs)."""
    def f(*a):
        return mod(*a)

    f.__code__ = f.__code__.replace()
    return torch.compile(f, backend="zenith")


def main():
    name, rounds = sys.argv[1], int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 112
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(num_classes=1000).train()
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    x = torch.randn(batch, 3, size, size)

    def step(run):
        mod, fn = run
        mod.zero_grad(set_to_none=True)
        loss = fn(x).pow(2).mean()
        loss.backward()
        return loss.item()

    want = step((m, m))
    runs = {"eager": (m, m)}
    for label, env in (("unpacked", "0"), ("packed per call", "1")):
        os.environ["ZENITH_PACK_PER_CALL"] = env
        c = copy.deepcopy(m)
        runs[label] = (c, compiled(c))
        got = step(runs[label])  # compiles: its executables read the variable now
        assert abs(got - want) <= 1e-4 * abs(want) + 1e-6, (label, got, want)
    os.environ.pop("ZENITH_PACK_PER_CALL")
    for _ in range(2):
        for run in runs.values():
            step(run)
    t = {k: [] for k in runs}
    for _ in range(rounds):
        for k, run in runs.items():
            t0 = time.perf_counter()
            step(run)
            t[k].append(time.perf_counter() - t0)
    print(f"{name} batch {batch} {size} px, {torch.get_num_threads()} threads, {rounds} rounds")
    for k, v in t.items():
        r = sorted(b / a for a, b in zip(t["eager"], v))
        print(f"  {k:16s} {st.median(v) * 1e3:8.1f} ms   / eager {st.median(r):.3f} [{r[len(r) // 4]:.3f}, "
              f"{r[3 * len(r) // 4]:.3f}]")
    r = sorted(b / a for a, b in zip(t["unpacked"], t["packed per call"]))
    print(f"  packed / unpacked per round {st.median(r):.3f} [{r[len(r) // 4]:.3f}, {r[3 * len(r) // 4]:.3f}]")


if __name__ == "__main__":
    main()
