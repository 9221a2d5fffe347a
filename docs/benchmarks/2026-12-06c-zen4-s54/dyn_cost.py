# Dynamo's own per-call cost on MobileNet V2 b1 (263 graph inputs): a backend whose compiled function returns a fixed
# tensor, against the same work called directly. python dyn_cost.py [MIB]: with MIB > 0 the function first adds 1 to
# a MIB MiB tensor, sweeping the caches as a model's call does (2026-12-06: 16); 0 (default), nothing.
import random, statistics, sys, time, torch, torchvision
torch.manual_seed(0); torch.set_num_threads(2)
mib = int(sys.argv[1]) if len(sys.argv) > 1 else 0
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
out = torch.zeros(1, 1000)
buf = torch.zeros(mib << 18)
def work():
    if mib: buf.add_(1.0)
    return (out,)
nargs = []
def noop_backend(gm, ex):
    nargs.append(len(ex))
    return lambda *args: work()
c = torch.compile(m, backend=noop_backend)
def skip():
    with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
        return c(x)
fns = {"compiled": lambda: c(x), "skip-guards": skip, "direct": work}
res = {k: [] for k in fns}
with torch.no_grad():
    for _ in range(5):
        for fn in fns.values(): fn()
    for r in range(2000 if mib == 0 else 600):
        for k, fn in random.sample(list(fns.items()), len(fns)):
            t = time.perf_counter(); fn(); res[k].append(time.perf_counter() - t)
print("graph inputs", nargs, "sweep MiB", mib)
for k in res:
    over = statistics.median([a - b for a, b in zip(res[k], res["direct"])])
    print(k, round(statistics.median(res[k]) * 1e6, 1), "us,", round(over * 1e6, 1), "us over the work alone")
