"""Training step of a torchvision CNN in one process: eager, Zenith with a conv's
non-constant filters read unpacked (ZENITH_PACK_PER_CALL=0 when its executables were
built: the state before), and Zenith packing them once per call; rounds alternate the
three. Usage: pack_ab.py MODEL ROUNDS [BATCH SIZE]. Prints median ms and per-round ratios.
Historical: the sixtieth session moved this packing into conv2d's kernel and removed
ZENITH_PACK_PER_CALL, so at later commits both arms pack and measure the same thing."""
import copy
import os
import statistics as st
import sys

import torch
import torchvision

import train_ab


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

    step = train_ab.stepper(x, lambda o: o.pow(2).mean())
    want = step((m, m))
    runs = {"eager": (m, m)}
    for label, env in (("unpacked", "0"), ("packed per call", "1")):
        os.environ["ZENITH_PACK_PER_CALL"] = env
        c = copy.deepcopy(m)
        runs[label] = (c, train_ab.compiled(c))
        got = step(runs[label])  # compiles: its executables read the variable now
        assert abs(got - want) <= 1e-4 * abs(want) + 1e-6, (label, got, want)
    os.environ.pop("ZENITH_PACK_PER_CALL")
    t = train_ab.interleave(runs, step, rounds)
    print(f"{name} batch {batch} {size} px, {torch.get_num_threads()} threads, {rounds} rounds")
    for k, v in t.items():
        print(f"  {k:16s} {st.median(v) * 1e3:8.1f} ms   / eager {train_ab.ratio(v, t['eager'])}")
    print(f"  packed / unpacked per round {train_ab.ratio(t['packed per call'], t['unpacked'])}")

if __name__ == "__main__":
    main()
