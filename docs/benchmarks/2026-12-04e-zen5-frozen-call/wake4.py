# MobileNet V2 b1: back-to-back vs after settle, for Zenith frozen, ORT, OpenVINO. Also "settle then warm":
# after the quiet, a 1 ms busy parallel loop in torch (same libgomp pool) right before Zenith's call.
import time, statistics, torch, torchvision, zenith, sys
from zenith.bench import stats, peers
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
ort = peers.onnxruntime_fn(m, (x,), 2); ov = peers.openvino_fn(m, (x,), 2)
fns = {"zenith-frozen": lambda: f(x), "ort": ort, "ov": ov}
big = torch.randn(65536)
def warm():
    t = time.perf_counter()
    while time.perf_counter() - t < 1e-3:
        big.mul_(1.0)
res = {}
with torch.no_grad():
    for _ in range(5):
        for fn in fns.values(): fn()
    for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
        for name, fn in fns.items():
            stats.settle(); fn(); t = time.perf_counter(); fn(); res.setdefault((name, "b2b"), []).append(time.perf_counter() - t)
            stats.settle(); t = time.perf_counter(); fn(); res.setdefault((name, "settled"), []).append(time.perf_counter() - t)
            if name == "zenith-frozen":
                stats.settle(); warm(); t = time.perf_counter(); fn(); res.setdefault((name, "settled+warm1ms"), []).append(time.perf_counter() - t)
                stats.settle(); big.mul_(1.0); t = time.perf_counter(); fn(); res.setdefault((name, "settled+1wake"), []).append(time.perf_counter() - t)
for k, v in sorted(res.items()):
    print(k, f"{statistics.median(v)*1e3:.3f} ms")
