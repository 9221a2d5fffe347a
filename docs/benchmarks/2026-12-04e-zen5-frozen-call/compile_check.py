# torch.compile path, MobileNet V2 b1: what WeightWatch.check costs per call (replaced, for measurement only,
# by a function returning the slot it returned), shuffled per round, back to back.
import random, torch, torchvision, zenith, statistics, time
from zenith.weights import WeightWatch
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad(): c(x)
real = WeightWatch.check
slot = {}
def fake(self, args):
    return 0
res = {"real": [], "fake": []}
with torch.no_grad():
    for r in range(600):
        for k in random.sample(list(res), 2):
            WeightWatch.check = real if k == "real" else fake
            t = time.perf_counter(); c(x); res[k].append(time.perf_counter() - t)
WeightWatch.check = real
d = [a - b for a, b in zip(res["real"], res["fake"])]
print({k: round(statistics.median(v) * 1e3, 4) for k, v in res.items()}, "check costs us", round(statistics.median(d) * 1e6, 1))
