# Dynamo's own per-call cost on MobileNet V2 b1: a backend whose compiled fn returns a fixed tensor.
import random, statistics, time, torch, torchvision
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
out = torch.zeros(1, 1000)
nargs = []
def noop_backend(gm, ex):
    nargs.append(len(ex))
    def f(*args): return (out,)
    return f
c = torch.compile(m, backend=noop_backend)
def skip():
    with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
        return c(x)
def bare():  # what a Python-level call with 263 tensors costs at least
    return None
fns = {"noop-compiled": lambda: c(x), "noop-skip-guards": skip}
res = {k: [] for k in fns}
with torch.no_grad():
    for _ in range(5):
        for fn in fns.values(): fn()
    for r in range(2000):
        for k, fn in random.sample(list(fns.items()), len(fns)):
            t = time.perf_counter(); fn(); res[k].append(time.perf_counter() - t)
print("graph inputs", nargs)
for k in res: print(k, round(statistics.median(res[k]) * 1e6, 1), "us")
