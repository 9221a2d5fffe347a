# The predecessor effect: zenith.freeze's call timed right after another call of itself,
# of ONNX Runtime or of OpenVINO (the bench's peer builds), each after the quiet (settle),
# shuffled rounds, one process. Also each peer timed after itself and after Zenith.
# python predecessor.py model batch [rounds]
import random, statistics, sys, time, torch, torchvision, zenith
from zenith.bench import stats, peers
torch.manual_seed(0); torch.set_num_threads(2)
name, b = sys.argv[1], int(sys.argv[2]); rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 30
m = getattr(torchvision.models, name.replace("-", "_"))().eval(); x = torch.randn(b, 3, 224, 224)
f = zenith.freeze(m)
fns = {"zenith-frozen": lambda: f(x), "onnxruntime": peers.onnxruntime_fn(m, (x,), 2), "openvino": peers.openvino_fn(m, (x,), 2)}
with torch.no_grad():
    for fn in fns.values():
        for _ in range(3): fn()
    pairs = [(a, t) for a in fns for t in fns]
    res = {p: [] for p in pairs}
    for r in range(rounds):
        for before, timed in random.sample(pairs, len(pairs)):
            stats.settle(); fns[before](); stats.settle()
            t = time.perf_counter(); fns[timed](); res[(before, timed)].append(time.perf_counter() - t)
for timed in fns:
    print(timed + ": " + ", ".join(f"after {a} {statistics.median(res[(a, timed)])*1e3:.2f}" for a in fns))
