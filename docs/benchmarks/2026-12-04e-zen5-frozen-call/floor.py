import random, torch, torchvision, zenith, statistics, time, sys
from zenith.callpath import _raw
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad(): f(x)
fr = next(iter(f._graphs.values()))
gl = fr._call.__globals__; RK = next(k for k in gl if k.startswith("_run")); run0 = gl[RK]
cap = {}
def capture(i, ints, slot):
    cap["i"] = list(i); cap["slot"] = slot; return run0(i, ints, slot)
gl[RK] = capture
with torch.no_grad(): f(x)
gl[RK] = run0
rest = cap["i"][1:]; slot = cap["slot"]
def minimal():
    k = []; return run0([_raw(x, k), *rest], (), slot)[0]
fns = dict(new=lambda: f(x), minimal=minimal, pinned_call=lambda: fr._call([x]))
res = {k: [] for k in fns}
with torch.no_grad():
    for r in range(1000):
        order = list(fns.items()); random.shuffle(order)
        for k, fn in order:
            t = time.perf_counter(); fn(); res[k].append(time.perf_counter() - t)
for k in res:
    d = [a - b for a, b in zip(res[k], res["minimal"])]
    print(k, round(statistics.median(res[k]) * 1e3, 4), "vs minimal us", round(statistics.median(d) * 1e6, 1))
