# MobileNet V2 batch 1, zenith.freeze: calls back to back against calls after stats.settle (the pool asleep),
# on 2 threads and on 1; and the torch.compile path beside it. Modes interleaved round by round.
import time, statistics, torch, torchvision, zenith
from zenith.bench import stats
torch.manual_seed(0)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m); c = torch.compile(m, backend="zenith")
res = {}
with torch.no_grad():
    for _ in range(5): f(x); c(x)
    for r in range(60):
        for th in (2, 1):
            torch.set_num_threads(th)
            for name, fn in (("freeze", f), ("compile", c)):
                fn(x); t = time.perf_counter(); fn(x); res.setdefault((name, th, "back-to-back"), []).append(time.perf_counter() - t)
                stats.settle(); t = time.perf_counter(); fn(x); res.setdefault((name, th, "settled"), []).append(time.perf_counter() - t)
for k, v in sorted(res.items()):
    print(k, f"{statistics.median(v)*1e3:.3f} ms")
