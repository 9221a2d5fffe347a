"""Training step of a torchvision CNN in one process: eager, Zenith with its 3x3 stride-1
convs on NCHW Winograd as before (ZENITH_CONV_NCHWC_WINOGRAD=0 while that arm compiles),
and Zenith running them over the blocked layout (conv3x3_winograd_nchwc, the image and
output converted). Rounds alternate the three. Usage: wino_ab.py MODEL ROUNDS [BATCH
SIZE]. Prints median ms and per-round ratios, median [p25, p75]."""
import copy
import os
import statistics as st
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-07a-zen4-s59"))
import train_ab  # noqa: E402


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
    for label, env in (("NCHW Winograd", "0"), ("blocked Winograd", "1")):
        os.environ["ZENITH_CONV_NCHWC_WINOGRAD"] = env  # read when each graph is prepared
        c = copy.deepcopy(m)
        runs[label] = (c, train_ab.compiled(c))
        got = step(runs[label])
        assert abs(got - want) <= 1e-4 * abs(want) + 1e-6, (label, got, want)
    t = train_ab.interleave(runs, step, rounds)
    print(f"{name} batch {batch} {size} px, {torch.get_num_threads()} threads, {rounds} rounds")
    for k, v in t.items():
        print(f"  {k:16s} {st.median(v) * 1e3:8.1f} ms   / eager {train_ab.ratio(v, t['eager'])}")
    print(f"  blocked / NCHW per round {train_ab.ratio(t['blocked Winograd'], t['NCHW Winograd'])}")


if __name__ == "__main__":
    main()
