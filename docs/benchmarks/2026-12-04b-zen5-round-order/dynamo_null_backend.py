import time, torch, torchvision, zenith, statistics, sys, os
torch.set_num_threads(2)
if os.environ.get("NOINLINE"): torch._dynamo.config.inline_inbuilt_nn_modules = False
m = torchvision.models.mobilenet_v2().eval()
x = torch.randn(1, 3, 224, 224)
nin = {}
def null_backend(gm, ex):
    nin['n'] = len(ex)
    out = gm(*ex)
    return lambda *a: out
a = torch.compile(m, backend=null_backend); f = zenith.freeze(m)
def mk(g):
    def fn():
        with torch.no_grad():
            return g(x)
    return fn
fns = {"null": mk(a), "freeze": mk(f)}
for fn in fns.values(): fn(); fn()
print("graph inputs", nin)
for inter in (False, True):
    s = {k: [] for k in fns}
    for i in range(100):
        for k in (fns if inter else ["null"]):
            t0 = time.perf_counter(); fns[k](); s[k].append(time.perf_counter() - t0)
    print("interleaved" if inter else "alone", {k: "%.3f" % (statistics.median(v) * 1e3) for k, v in s.items() if v})
