# Per-node medians of a frozen static-INT8 ResNet-50 (zenith.profile, 20 calls): python int8_nodes.py BATCH [stem]
# ("stem": the 7x7 stem quantized too, past zenith.quantize's rule that keeps it fp32).
import sys, torch, torchvision, zenith, collections, statistics
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
import importlib; Q = importlib.import_module("zenith.quant.quantize"); orig = Q._int8_conv_slower
if len(sys.argv) > 2: Q._int8_conv_slower = lambda conv, isa=None: None if conv.in_channels <= 4 else orig(conv, isa)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(x)
    with zenith.profile(trace="/tmp/w/q_trace.json") as p:
        for _ in range(20): f(x)
per = collections.defaultdict(list); order = []; info = {}
for op, node, graph, tid, ts, dur, shape in p.events:
    key = (graph, node)
    if key not in per: order.append(key); info[key] = (op, shape)
    per[key].append(dur)
tot = 0; by = collections.defaultdict(float)
rows = []
for key in order:
    op, shape = info[key]; med = statistics.median(per[key]); tot += med; by[op] += med
    rows.append((med, op, key[1], tuple(shape)))
for r in rows: print(f"{r[0]:8.1f} us {r[1]:22s} {str(r[2]):5s} {r[3]}")
print("sum of node medians", round(tot / 1e3, 2), "ms;", {k: round(v) for k, v in by.items()})
