# How long each runtime's threads stay busy after its call returns (zenith.bench.stats.settle: thread states),
# and each contestant's time right after another with and without waiting for that. (Its first run, in
# outputs.txt, used the earlier CPU-time settle of a171c39 and ONNX Runtime with spinning off.)
import sys, time, random, statistics, torch, torchvision, zenith
from zenith.bench import peers
torch.set_num_threads(2); torch.manual_seed(0)
B = int(sys.argv[1]); rounds = int(sys.argv[2])
from zenith.bench.stats import settle
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
z = zenith.freeze(m)
fns = {"zenith": lambda: z(x), "openvino": peers.openvino_fn(m, (x,), 2), "onnxruntime": peers.onnxruntime_fn(m, (x,), 2)}
def timed(fn):
    s = time.perf_counter(); fn(); return time.perf_counter() - s
with torch.no_grad():
    for fn in fns.values():
        for _ in range(3): fn()
    waits = {k: [] for k in fns}; res = {}
    rng = random.Random(0)
    for r in range(rounds):
        pairs = [(a, b, s) for s in (False, True) for a in fns for b in fns]
        rng.shuffle(pairs)
        for a, b, s in pairs:
            settle(); fns[a]()
            if s: waits[a].append(settle())
            res.setdefault((a, b, s), []).append(timed(fns[b]))
for k, v in waits.items():
    print(f"after {k:<12} settle waited median {statistics.median(v)*1e3:6.1f} ms, max {max(v)*1e3:6.1f}")
for (a, b, s), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
    print(f"batch {B} settle {s!s:<5}: {b:<12} after {a:<12} {statistics.median(v)*1e3:8.2f} ms")
