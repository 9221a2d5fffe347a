# Dynamo's per-call cost when the compiled fn evicts the caches (as 4.8 ms of convs do).
import random, statistics, time, torch, torchvision
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
out = torch.zeros(1, 1000)
buf = torch.zeros(4 << 20)  # 16 MiB
inner = []
def noop_backend(gm, ex):
    def f(*args):
        t = time.perf_counter(); buf.add_(1.0); inner.append(time.perf_counter() - t); return (out,)
    return f
c = torch.compile(m, backend=noop_backend)
def skip():
    with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
        return c(x)
def direct():
    buf.add_(1.0); return out
fns = {"thrash-compiled": lambda: c(x), "thrash-skip-guards": skip, "thrash-direct": direct}
res = {k: [] for k in fns}
with torch.no_grad():
    for _ in range(5):
        for fn in fns.values(): fn()
    for r in range(600):
        for k, fn in random.sample(list(fns.items()), len(fns)):
            t = time.perf_counter(); fn(); res[k].append(time.perf_counter() - t)
for k in res: print(k, round(statistics.median(res[k]) * 1e6, 1), "us", round(statistics.median([a-b for a,b in zip(res[k], res['thrash-direct'])])*1e6,1), "over direct")
