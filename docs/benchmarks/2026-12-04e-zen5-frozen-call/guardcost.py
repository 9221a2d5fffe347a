import random, torch, torchvision, zenith, statistics, time
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
c = torch.compile(m, backend="zenith"); f = zenith.freeze(m)
def skip():
    with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
        return c(x)
fns = {"compiled": lambda: c(x), "compiled-skip-guards": skip, "frozen": lambda: f(x)}
res = {k: [] for k in fns}
with torch.no_grad():
    for _ in range(5):
        for fn in fns.values(): fn()
    for r in range(600):
        for k, fn in random.sample(list(fns.items()), 3):
            t = time.perf_counter(); fn(); res[k].append(time.perf_counter() - t)
for k in res:
    d = [a - b for a, b in zip(res[k], res["frozen"])]
    print(k, round(statistics.median(res[k]) * 1e3, 3), "vs frozen us", round(statistics.median(d) * 1e6, 1))
