# ResNet-50's stem (7x7/2 conv 3 -> 64, batch norm, ReLU, 3x3/2 max pool) and its first stage (layer1),
# static INT8 (the stem in int8, as zenith.quantize does on AVX-512 VNNI), frozen; calls for SECONDS
# (for perf) and per-node medians: python stem_only.py BATCH [SECONDS]
import sys, time, collections, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
secs = float(sys.argv[2]) if len(sys.argv) > 2 else 0
r = torchvision.models.resnet50().eval()
m = torch.nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1).eval()
x = torch.randn(b, 3, 224, 224)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(x)
    print("max |zenith - eager|", (f(x) - m(x)).abs().max().item(), flush=True)
    with zenith.profile(trace="/tmp/stem_trace.json") as p:
        for _ in range(30): f(x)
    per = collections.defaultdict(list)
    for op, node, graph, tid, ts, dur, shape in p.events: per[(op, node, tuple(shape))].append(dur)
    for k, v in per.items(): print(f"{statistics.median(v):8.1f} us {k}")
    print("start", flush=True)
    t = time.perf_counter(); n = 0
    while time.perf_counter() - t < secs: f(x); n += 1
    if n: print((time.perf_counter() - t) / n * 1e3, "ms a call")
