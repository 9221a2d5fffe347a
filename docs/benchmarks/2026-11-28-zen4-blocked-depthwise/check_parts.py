# The weight check's parts in situ (MobileNet V2 b1, 60 calls): python check_parts.py
import os, time, torch, torchvision, zenith
from zenith import weights as W
torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
c = torch.compile(m, backend="zenith")
T = {k: [] for k in ("ws", "ids", "lookup", "held", "watch", "versions")}
pc = time.perf_counter
def check(self, args):
    t0 = pc(); ws = [args[i] for i in self.positions]
    t1 = pc(); ids = tuple(map(id, ws))
    t2 = pc(); known = self._sets.get(ids)
    t3 = pc(); h = self._held()
    t4 = pc(); watch = self._watched()
    t5 = pc(); v = tuple(W._version_of(ws[j]) for j in watch)
    t6 = pc()
    for k, a, b in (("ws", t0, t1), ("ids", t1, t2), ("lookup", t2, t3), ("held", t3, t4), ("watch", t4, t5), ("versions", t5, t6)):
        T[k].append(b - a)
    return orig(self, args)
orig = W.WeightWatch.check
with torch.no_grad():
    for _ in range(5): c(x)
    W.WeightWatch.check = check
    for _ in range(60): c(x)
for k, v in T.items():
    v = sorted(v[5:]); print(f"{k:9} {v[len(v)//2]*1e6:7.1f} us")
