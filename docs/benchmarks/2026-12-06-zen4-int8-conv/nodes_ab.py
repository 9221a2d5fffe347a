# Per-node medians (zenith.profile) of a frozen static-INT8 ResNet-50 with a temporary switch read per
# call (ZB_FUSED set: the old path) off and on, profiled in alternating blocks of 5 calls: python nodes_ab.py BATCH
import os, sys, torch, torchvision, zenith, collections, statistics
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
per = {0: collections.defaultdict(list), 1: collections.defaultdict(list)}; order = []; info = {}
with torch.no_grad():
    for _ in range(5): f(x)
    for rnd in range(8):
        for old in (0, 1):
            if old: os.environ["ZB_FUSED"] = "1"
            else: os.environ.pop("ZB_FUSED", None)
            f(x)
            with zenith.profile(trace="/tmp/nodes_ab_trace.json") as p:
                for _ in range(5): f(x)
            for op, node, graph, tid, ts, dur, shape in p.events:
                key = (graph, node)
                if key not in info: order.append(key); info[key] = (op, shape)
                per[old][key].append(dur)
tot = [0.0, 0.0]
for key in order:
    op, shape = info[key]; new, old = statistics.median(per[0][key]), statistics.median(per[1][key])
    tot[0] += new; tot[1] += old
    print(f"{new:8.1f} {old:8.1f} us  {new/old:6.3f}  {op:18s} {str(key[1]):5s} {tuple(shape)}")
print(f"sum of node medians: new {tot[0]/1e3:.2f} ms, old {tot[1]/1e3:.2f} ms")
