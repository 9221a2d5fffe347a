import torch, torchvision, zenith, statistics, time
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad(): f(x)
fr = next(iter(f._graphs.values()))
g = fr.graph
bound = fr.bound
ww = g._weights if hasattr(g, "_weights") else None
print([a for a in dir(g) if not a.startswith("__")])
import gc
args = [*bound, x]
ws = g.weights
seg = g.segments[0]
print(type(seg), [a for a in dir(seg) if not a.startswith("__")][:40])
def tm(fn, n=2000):
    ts = []
    for _ in range(n):
        t = time.perf_counter_ns(); fn(); ts.append(time.perf_counter_ns() - t)
    return statistics.median(ts) / 1e3
with torch.no_grad():
    print("check us", tm(lambda: ws.check(args)))
    print("data_ptr list us", tm(lambda: [a.data_ptr() for a in bound]))
    print("whole call us", tm(lambda: f(x), 300))
    print("inner _call us", tm(lambda: fr._call([*bound, x]), 300))
gl = fr._call.__globals__ if hasattr(fr._call, "__globals__") else None
print(type(fr._call), [k for k in gl if k.startswith("_run")])
run0 = gl["_run0"]
acc = []
def timed(*a):
    t = time.perf_counter_ns(); r = run0(*a); acc.append(time.perf_counter_ns() - t); return r
gl["_run0"] = timed
with torch.no_grad():
    w = tm(lambda: f(x), 300)
print("whole", w, "run0", statistics.median(acc) / 1e3)
with torch.no_grad():
    with zenith.profiler.profile(trace="/tmp/exp/z2.json") as p:
        acc.clear(); w = tm(lambda: f(x), 300)
ev = sorted(p.events, key=lambda e: e[4])
calls = []; cur = []
for e in ev:
    if e[1] == 0 and cur: calls.append(cur); cur = []
    cur.append(e)
calls.append(cur)
print("profiled: whole", w, "run0", statistics.median(acc) / 1e3, "span", statistics.median(c[-1][4] + c[-1][5] - c[0][4] for c in calls))
print(run0)
