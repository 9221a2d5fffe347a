# Zenith's time by the call before it: another Zenith call, OpenVINO, ONNX Runtime (the bench's own
# peer builders and settings). Rounds: for each predecessor P in a shuffled order, call P then time Zenith.
import sys, time, random, statistics, torch, torchvision, zenith
from zenith.bench import peers
torch.set_num_threads(2); torch.manual_seed(0)
B = int(sys.argv[1]); rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 12
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
z = zenith.freeze(m)
ovf = peers.openvino_fn(m, (x,), 2); ortf = peers.onnxruntime_fn(m, (x,), 2)
preds = {"zenith": lambda: z(x), "openvino": ovf, "onnxruntime": ortf}
def timed(fn):
    s = time.perf_counter(); fn(); return time.perf_counter() - s
with torch.no_grad():
    for fn in preds.values():
        for _ in range(3): fn()
    res = {k: [] for k in preds}; own = {k: [] for k in preds}
    rng = random.Random(0)
    for r in range(rounds):
        order = list(preds); rng.shuffle(order)
        for p in order:
            own[p].append(timed(preds[p]))
            res[p].append(timed(lambda: z(x)))
for p in preds:
    print(f"batch {B}: zenith after {p:<12} median {statistics.median(res[p])*1e3:8.2f} ms   ({p} itself {statistics.median(own[p])*1e3:8.2f} ms)")
