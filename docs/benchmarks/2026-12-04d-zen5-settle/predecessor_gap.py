# Zenith's time right after OpenVINO, ONNX Runtime or Zenith, with an idle gap of G ms between the two calls,
# and each peer's time after Zenith with the same gap.
import sys, time, random, statistics, torch, torchvision, zenith
from zenith.bench import peers
torch.set_num_threads(2); torch.manual_seed(0)
B = int(sys.argv[1]); rounds = int(sys.argv[2]); gaps = [float(g) for g in sys.argv[3].split(",")]
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
z = zenith.freeze(m)
fns = {"zenith": lambda: z(x), "openvino": peers.openvino_fn(m, (x,), 2), "onnxruntime": peers.onnxruntime_fn(m, (x,), 2)}
def timed(fn):
    s = time.perf_counter(); fn(); return time.perf_counter() - s
with torch.no_grad():
    for fn in fns.values():
        for _ in range(3): fn()
    res = {}
    rng = random.Random(0)
    for r in range(rounds):
        pairs = [(a, b, g) for g in gaps for a in fns for b in fns if (a == "zenith") != (b == "zenith") or a == b == "zenith"]
        rng.shuffle(pairs)
        for a, b, g in pairs:
            fns[a]()
            if g: time.sleep(g / 1e3)
            res.setdefault((a, b, g), []).append(timed(fns[b]))
for (a, b, g), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
    print(f"batch {B} gap {g:5.1f} ms: {b:<12} after {a:<12} {statistics.median(v)*1e3:8.2f} ms")
