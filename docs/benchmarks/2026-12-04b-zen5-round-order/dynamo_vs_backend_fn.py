import time, torch, torchvision, zenith, statistics, sys, os
import zenith.backend as zb
torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval()
x = torch.randn(1, 3, 224, 224)
inner, outer = [], []
orig_fx = zb._compile_fx
def cap(*a, **k):
    c = orig_fx(*a, **k); oc = c._call
    def w(args):
        t0 = time.perf_counter(); r = oc(args); inner.append(time.perf_counter() - t0); return r
    c._call = w
    return c
zb._compile_fx = cap
orig_di = zb._direct_inference
def di(*a, **k):
    run = orig_di(*a, **k)
    def run2(*args):
        t0 = time.perf_counter(); r = run(*args); outer.append(time.perf_counter() - t0); return r
    return run2
zb._direct_inference = di
a = zenith.compile(m); f = zenith.freeze(m)
def mk(g):
    def fn():
        with torch.no_grad():
            return g(x)
    return fn
fns = {"compile": mk(a), "freeze": mk(f)}
for fn in fns.values(): fn(); fn()
s = {k: [] for k in fns}
inner.clear(); outer.clear()
for i in range(100):
    for k in fns:
        t0 = time.perf_counter(); fns[k](); s[k].append(time.perf_counter() - t0)
med = lambda v: "%.3f" % (statistics.median(v) * 1e3)
print({k: med(v) for k, v in s.items()}, "backend fn", med(outer), "generated call", med(inner))
