import random, torch, torchvision, zenith, statistics, time, operator
from zenith.callpath import _raw
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad(): f(x)
fr = next(iter(f._graphs.values()))
gl = fr._call.__globals__; run0 = gl["_run0"]
cap = {}
def capture(i, ints, slot):
    cap["i"] = list(i); cap["slot"] = slot; return run0(i, ints, slot)
gl["_run0"] = capture
with torch.no_grad(): f(x)
gl["_run0"] = run0
rest = cap["i"][1:]; slot = cap["slot"]
bound = fr.bound
dp = torch.Tensor.data_ptr
ver = operator.attrgetter("_version")
def base(x):
    k = []; return run0([_raw(x, k), *rest], (), slot)[0]
def comp(x):
    k = []; r = run0([_raw(x, k), *rest], (), slot)[0]; _ = [b.data_ptr() for b in bound]; return r
def mapped(x):
    k = []; r = run0([_raw(x, k), *rest], (), slot)[0]; _ = list(map(dp, bound)); return r
def versions(x):
    k = []; r = run0([_raw(x, k), *rest], (), slot)[0]; _ = list(map(ver, bound)); return r
def ids(x):
    k = []; r = run0([_raw(x, k), *rest], (), slot)[0]; _ = tuple(map(id, bound)); return r
fns = dict(base=base, comp=comp, mapped=mapped, versions=versions, ids=ids)
res = {k: [] for k in fns}
with torch.no_grad():
    for r in range(800):
        order = list(fns.items()); random.shuffle(order)
        for name, fn in order:
            t = time.perf_counter(); fn(x); res[name].append(time.perf_counter() - t)
for k in res:
    d = [a - b for a, b in zip(res[k], res["base"])]
    print(k, round(statistics.median(res[k]) * 1e3, 4), "vs base us", round(statistics.median(d) * 1e6, 1))
