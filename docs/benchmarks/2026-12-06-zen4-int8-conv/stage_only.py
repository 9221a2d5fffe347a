# One stage of ResNet-50 (torchvision's layerN) alone, static INT8, frozen: per-node medians, then calls for
# SECONDS (for perf). python stage_only.py STAGE BATCH [SECONDS]
import sys, time, collections, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
stage, b = int(sys.argv[1]), int(sys.argv[2])
secs = float(sys.argv[3]) if len(sys.argv) > 3 else 0
r = torchvision.models.resnet50().eval()
c_in, hw = {1: (64, 56), 2: (256, 56), 3: (512, 28), 4: (1024, 14)}[stage]
m = torch.nn.Sequential(torch.nn.ReLU(), getattr(r, f"layer{stage}")).eval()
shape = (b, c_in, hw, hw)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, *shape[1:]).relu(),) for _ in range(4)])
f = zenith.freeze(m)
x = torch.randn(shape).relu()
with torch.no_grad():
    for _ in range(5): f(x)
    with zenith.profile(trace="/tmp/stage_trace.json") as p:
        for _ in range(30): f(x)
    per = collections.defaultdict(list)
    for op, node, graph, tid, ts, dur, shape_ in p.events: per[(op, node, tuple(shape_))].append(dur)
    for k, v in per.items(): print(f"{statistics.median(v):8.1f} us {k}")
    print("start", flush=True)
    t = time.perf_counter(); n = 0
    while time.perf_counter() - t < secs: f(x); n += 1
    if n: print((time.perf_counter() - t) / n * 1e3, "ms a call")
