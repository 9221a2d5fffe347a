"""Training step of a torchvision CNN in one process: eager, Zenith with the convolutions'
backward left to PyTorch (the state before: no convolution_backward converter), and
Zenith running it (conv_transpose2d / conv2d with flipped filters for the input's
gradient, conv2d_weight_grad for the filters'); rounds alternate the three. Usage:
conv_bwd_ab.py MODEL ROUNDS [BATCH SIZE]. Prints median ms and per-round ratios."""
import copy
import os
import statistics as st
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-07a-zen4-s59"))
import train_ab  # noqa: E402

from zenith import importer  # noqa: E402

aten = torch.ops.aten


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
    conv_bwd = importer.CONVERTERS.pop(aten.convolution_backward.default)

    def all_but_dense(L, node):  # dense KxK convs' backward left to PyTorch
        w, groups = node.args[2], node.args[9]
        if groups == 1 and any(k > 1 for k in w.meta["val"].shape[2:]):
            raise importer.Unsupported("dense KxK conv backward")
        return conv_bwd(L, node)
    for label in ("bwd in PyTorch", "bwd dense in PyTorch", "bwd in Zenith"):
        if label != "bwd in PyTorch":
            importer.CONVERTERS[aten.convolution_backward.default] = conv_bwd if label == "bwd in Zenith" else all_but_dense
        c = copy.deepcopy(m)
        runs[label] = (c, train_ab.compiled(c))
        got = step(runs[label])  # compiles with the converters as they are now
        assert abs(got - want) <= 1e-4 * abs(want) + 1e-6, (label, got, want)
    t = train_ab.interleave(runs, step, rounds)
    print(f"{name} batch {batch} {size} px, {torch.get_num_threads()} threads, {rounds} rounds")
    for k, v in t.items():
        print(f"  {k:16s} {st.median(v) * 1e3:8.1f} ms   / eager {train_ab.ratio(v, t['eager'])}")
    print(f"  Zenith / PyTorch per round {train_ab.ratio(t['bwd in Zenith'], t['bwd in PyTorch'])}")


if __name__ == "__main__":
    main()
