import time, torch, torchvision, zenith, statistics, sys
torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval()
x = torch.randn(1, 3, 224, 224)
a = zenith.compile(m); b = torch.compile(m, backend="zenith"); f = zenith.freeze(m)
fns = {"zenith.compile": a, "torch.compile": b, "freeze": f}
def mk(g):
    def fn():
        with torch.no_grad():
            return g(x)
    return fn
fns = {k: mk(v) for k, v in fns.items()}
for fn in fns.values(): fn()
import os
if os.environ.get("RESET"): torch._dynamo.reset()
for fn in fns.values(): fn(); fn()
s = {k: [] for k in fns}
names = list(fns)
for i in range(60):
    order = names[i % 3:] + names[:i % 3]
    for k in order:
        t0 = time.perf_counter(); fns[k](); s[k].append(time.perf_counter() - t0)
for k, v in s.items(): print(k, "%.3f" % (statistics.median(v) * 1e3))
