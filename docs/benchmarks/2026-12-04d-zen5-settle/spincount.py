# Zenith frozen (MobileNet V2 and ResNet-50 batch 1), settled and back to back, and how long its threads run on
# after a call: run once per GOMP_SPINCOUNT setting (libgomp reads it at load).
import os, sys, time, statistics, torch, torchvision, zenith
from zenith.bench import stats
torch.set_num_threads(2); torch.manual_seed(0)
for name in ("mobilenet_v2", "resnet50"):
    m = getattr(torchvision.models, name)().eval(); x = torch.randn(1, 3, 224, 224); f = zenith.freeze(m)
    b2b, st, busy = [], [], []
    with torch.no_grad():
        for _ in range(5): f(x)
        for _ in range(40):
            f(x); t = time.perf_counter(); f(x); b2b.append(time.perf_counter() - t)
            busy.append(stats.settle()); t = time.perf_counter(); f(x); st.append(time.perf_counter() - t)
    print(f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', 'default')} {name}: back to back {statistics.median(b2b)*1e3:.3f} ms, "
          f"settled {statistics.median(st)*1e3:.3f} ms, threads busy after {statistics.median(busy)*1e3:.1f} ms")
