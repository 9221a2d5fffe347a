"""Before upsample2d: the fallback against torch's decomposition of upsample_bilinear2d
(four 2-d gathers through Zenith's index kernel). Run at 30cfddf, beside the model sweep.
  python upsample_decomp_ab.py OUT_SIDE     (520 and 130 were run)
"""
import time, torch, zenith, torch.nn.functional as F, sys
import zenith.importer as I
aten = torch.ops.aten
torch.set_num_threads(2)
for k in (aten.upsample_bilinear2d.default, aten.upsample_bilinear2d.vec):  # since 433a80d: its own op
    I.CONVERTERS.pop(k, None)
def make():
    conv = torch.nn.Conv2d(64, 21, 1).eval()
    def f(x):
        return F.interpolate(conv(x), size=(int(sys.argv[1]), int(sys.argv[1])), mode="bilinear", align_corners=False)
    return f
x = torch.randn(1, 64, 65, 65)
fa, fb = make(), make()
fb.__code__ = fb.__code__.replace()  # a distinct code object: its own Dynamo cache
with torch.no_grad():
    a = torch.compile(fa, backend="zenith"); a(x)
    I.DECOMPOSE += [aten.upsample_bilinear2d.default, aten.upsample_bilinear2d.vec]
    b = torch.compile(fb, backend="zenith"); b(x)
    ts = {"eager": [], "fallback": [], "decomposed": []}
    for r in range(30):
        for k, fn in (("eager", fa), ("fallback", a), ("decomposed", b)):
            t = time.perf_counter(); fn(x); ts[k].append(time.perf_counter() - t)
    for k, v in ts.items(): v.sort(); print(sys.argv[1], k, "%.2f ms" % (1e3 * v[len(v)//2]))
