"""The session's new lowerings against the fallbacks they replace, one process a model:
eager, Zenith with the new converters removed (those ops go to PyTorch, as before this
session), and Zenith as committed, called in turn each round; median ms and the
per-round ratio new / old with its 25th and 75th percentiles; outputs checked.

  python fallback_ab.py MODEL [ROUNDS]      (MODEL as model_sweep.py names it)
"""
import statistics
import sys
import time

import torch

import zenith
from zenith import backend as zb
from zenith import importer

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from model_sweep import build, flat, perturb  # noqa: E402

aten, prims = torch.ops.aten, torch.ops.prims
NEW = [aten.slice_scatter.default, aten.fill.Tensor, aten.zero.default, aten.clamp_min.default, aten.clamp_max.default,
       aten.fmod.Scalar, aten.repeat.default, aten.as_strided.default, aten.copy.default, aten.flip.default,
       prims.var.default, prims.sum.default, prims.broadcast_in_dim.default, prims.div.default,
       aten.upsample_nearest2d.default, aten.upsample_nearest2d.vec, aten._upsample_nearest_exact2d.default,
       aten._upsample_nearest_exact2d.vec, aten.upsample_bilinear2d.default, aten.upsample_bilinear2d.vec]


def compiled(m, x, kw, without):
    def f(*a, **k):
        return m(*a, **k)

    f.__code__ = f.__code__.replace()  # a code object of its own: its own Dynamo cache
    saved = {k: importer.CONVERTERS.pop(k) for k in (NEW if without else []) if k in importer.CONVERTERS}
    if without:  # conv1d went to PyTorch too
        conv = saved[aten.convolution.default] = importer.CONVERTERS[aten.convolution.default]

        def conv2d_only(L, node):
            if importer.meta(node.args[0]).dim() != 4:
                raise importer.Unsupported("convolution over 1-d input (only 2-d)")
            return conv(L, node)

        importer.CONVERTERS[aten.convolution.default] = conv2d_only
    try:
        with zb.collect_reports() as sink:
            c = torch.compile(f, backend="zenith")
            c(*x, **kw)
    finally:
        importer.CONVERTERS.update(saved)
    segs = sum(g.segments for g in sink)
    fb = sum(e["count"] for g in sink for e in g.fallback_ops.values())
    return c, segs, fb


def main():
    name, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 15
    torch.manual_seed(0)
    m, x, kw = build(name)
    m.eval()
    perturb(m)
    torch.set_num_threads(2)
    with torch.no_grad():
        ref = flat(m(*x, **kw))
        old, s_old, f_old = compiled(m, x, kw, True)
        new, s_new, f_new = compiled(m, x, kw, False)
        for fn in (old, new):
            for a, b in zip(ref, flat(fn(*x, **kw))):
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4 * max(1.0, a.abs().max().item()))
        ts = {"eager": [], "old": [], "new": []}
        for r in range(rounds):
            for k, fn in (("eager", m), ("old", old), ("new", new)):
                t = time.perf_counter()
                fn(*x, **kw)
                ts[k].append(time.perf_counter() - t)
    ratio = sorted(n / o for n, o in zip(ts["new"], ts["old"]))
    q = statistics.quantiles(ratio, n=4)
    med = {k: 1e3 * statistics.median(v) for k, v in ts.items()}
    print(f"{name}: eager {med['eager']:.2f} ms, zenith before {med['old']:.2f} ms ({s_old} segments, {f_old} fallback "
          f"nodes), after {med['new']:.2f} ms ({s_new} segments, {f_new} fallback nodes); after / before per round "
          f"{statistics.median(ratio):.3f} [{q[0]:.3f}, {q[2]:.3f}], {rounds} rounds")


if __name__ == "__main__":
    main()
