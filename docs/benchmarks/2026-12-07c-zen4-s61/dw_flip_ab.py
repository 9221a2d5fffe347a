"""MobileNet V2's training step (batch 8, 112 px) in one process: eager, Zenith with its
stride-1 depthwise input gradients by conv_transpose2d (the importer's rule before this
session: flipped only on maps of 100+ pixels) and Zenith flipping them all (conv2d's
depthwise kernels). Rounds alternate the three. Usage: dw_flip_ab.py ROUNDS."""
import copy
import os
import statistics as st
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-07a-zen4-s59"))
import train_ab  # noqa: E402

from zenith import importer  # noqa: E402


def main():
    rounds = int(sys.argv[1])
    torch.manual_seed(0)
    m = torchvision.models.mobilenet_v2(num_classes=1000).train()
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
    x = torch.randn(8, 3, 112, 112)
    step = train_ab.stepper(x, lambda o: o.pow(2).mean())
    want = step((m, m))
    runs = {"eager": (m, m)}
    new_rule = importer._flip_pays

    def old_rule(wshape, padding, dilation, groups, out_hw, batch):
        if groups > 1 and wshape[0] == groups and wshape[1] == 1 and out_hw is not None:
            return out_hw[0] * out_hw[1] >= importer._FLIP_MIN_PIXELS
        return new_rule(wshape, padding, dilation, groups, out_hw, batch)
    for label, rule in (("dw by columns", old_rule), ("dw flipped", new_rule)):
        importer._flip_pays = rule
        c = copy.deepcopy(m)
        runs[label] = (c, train_ab.compiled(c))
        got = step(runs[label])
        assert abs(got - want) <= 1e-4 * abs(want) + 1e-6, (label, got, want)
    importer._flip_pays = new_rule
    t = train_ab.interleave(runs, step, rounds)
    print(f"mobilenet_v2 batch 8 112 px, {torch.get_num_threads()} threads, {rounds} rounds")
    for k, v in t.items():
        print(f"  {k:14s} {st.median(v) * 1e3:8.1f} ms   / eager {train_ab.ratio(v, t['eager'])}")
    print(f"  flipped / columns per round {train_ab.ratio(t['dw flipped'], t['dw by columns'])}")


if __name__ == "__main__":
    main()
