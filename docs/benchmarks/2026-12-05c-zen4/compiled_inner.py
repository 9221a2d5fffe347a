import random, torch, torchvision, zenith, statistics, time
import zenith.backend as B
torch.manual_seed(0); torch.set_num_threads(2)
inner = []
orig = B._direct_inference
def wrapped(*a, **k):
    fn = orig(*a, **k)
    def run(*args):
        t = time.perf_counter(); r = fn(*args); inner.append(time.perf_counter() - t); return r
    return run
B._direct_inference = wrapped
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
c = torch.compile(m, backend="zenith"); f = zenith.freeze(m)
res = {"c": [], "f": []}
with torch.no_grad():
    for _ in range(5): c(x); f(x)
    inner.clear()
    for r in range(400):
        for k in random.sample(["c", "f"], 2):
            fn = c if k == "c" else f
            t = time.perf_counter(); fn(x); res[k].append(time.perf_counter() - t)
print("compiled", statistics.median(res["c"])*1e3, "inner", statistics.median(inner)*1e3, "frozen", statistics.median(res["f"])*1e3)
