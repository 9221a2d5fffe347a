# MobileNet V2 b1 (or resnet50), 2 threads: Zenith frozen/compiled, ORT, OpenVINO; each call after stats.settle
# (as the bench times) and back to back; shuffled order per round; per-round ratios to ORT.
import random, time, statistics, torch, torchvision, zenith, sys
from zenith.bench import stats, peers
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1]; rounds = int(sys.argv[2])
m = getattr(torchvision.models, name)().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m); c = torch.compile(m, backend="zenith")
ort = peers.onnxruntime_fn(m, (x,), 2); ov = peers.openvino_fn(m, (x,), 2)
fns = {"frozen": lambda: f(x), "compiled": lambda: c(x), "ort": ort, "ov": ov}
res = {}
with torch.no_grad():
    for _ in range(5):
        for fn in fns.values(): fn()
    for r in range(rounds):
        order = list(fns.items()); random.shuffle(order)
        for k, fn in order:
            stats.settle(); t = time.perf_counter(); fn(); res.setdefault((k, "settled"), []).append(time.perf_counter() - t)
            fn(); t = time.perf_counter(); fn(); res.setdefault((k, "b2b"), []).append(time.perf_counter() - t)
for mode in ("settled", "b2b"):
    for k in fns:
        v = res[(k, mode)]; rat = [a / b for a, b in zip(v, res[("ort", mode)])]
        print(mode, k, f"{statistics.median(v)*1e3:.3f} ms", f"/ort {statistics.median(rat):.3f}")
