import random, torch, torchvision, zenith, statistics, time, sys
from zenith.callpath import _raw
from zenith.bench import stats
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad(): f(x)
fr = next(iter(f._graphs.values()))
gl = fr._call.__globals__
run0 = gl["_run0"]
cap = {}
def capture(i, ints, slot):
    cap["i"] = list(i); cap["slot"] = slot; return run0(i, ints, slot)
gl["_run0"] = capture
with torch.no_grad(): f(x)
gl["_run0"] = run0
rest = cap["i"][1:]; slot = cap["slot"]
def minimal(x):
    k = []
    r = run0([_raw(x, k), *rest], (), slot)
    return r[0]
with torch.no_grad():
    assert torch.equal(minimal(x), f(x))
res = {}
settle = len(sys.argv) > 1
with torch.no_grad():
    for r in range(300):
        for name, fn in (("frozen", f), ("minimal", minimal)):
            if settle: stats.settle()
            t = time.perf_counter(); fn(x); res.setdefault(name, []).append(time.perf_counter() - t)
d = [a - b for a, b in zip(res["frozen"], res["minimal"])]
print({k: round(statistics.median(v) * 1e3, 4) for k, v in res.items()}, "paired diff us", round(statistics.median(d) * 1e6, 1))
ws = fr.graph.weights
bound = fr.bound
def with_check(x):
    args = [*bound, x]
    s = ws.check(args)
    k = []
    r = run0([_raw(x, k), *rest], (), s)
    return r[0]
i_src = fr.graph.call_source
def with_ptrs(x):
    args = [*bound, x]
    s = ws.check(args)
    k = []
    r = run0([_raw(x, k), *[b.data_ptr() for b in bound]][:len(rest) + 1] if False else [_raw(x, k), *rest], (), s)
    _ = [b.data_ptr() for b in bound]
    return r[0]
res = {}
with torch.no_grad():
    for r in range(300):
        order = [("frozen", f), ("minimal", minimal), ("check", with_check), ("check+ptrs", with_ptrs), ("_call", lambda x: fr._call([*bound, x]))]
        random.shuffle(order)
        for name, fn in order:
            if settle: stats.settle()
            t = time.perf_counter(); fn(x); res.setdefault(name, []).append(time.perf_counter() - t)
for k in res:
    d = [a - b for a, b in zip(res[k], res["minimal"])]
    print(k, round(statistics.median(res[k]) * 1e3, 4), "vs minimal us", round(statistics.median(d) * 1e6, 1))
