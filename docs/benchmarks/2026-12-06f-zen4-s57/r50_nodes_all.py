# r50_nodes.py (session 56) with int8_everywhere=True: per-node kernel time, fp32 against int8-static with every conv int8
# fp32 and static INT8 (percentile 99.99), aggregated by (op, output shape): python r50_nodes.py BATCH
import sys, torch, torchvision, zenith, copy, collections, statistics
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1])
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)], int8_everywhere=True,
                    method="percentile", percentile=99.99)
res = {}
for name, model in (("fp32", m), ("int8", q)):
    f = zenith.freeze(model)
    per = collections.defaultdict(list)
    with torch.no_grad():
        for _ in range(3): f(x)
        for _ in range(10):
            with zenith.profile(trace="/dev/null") as p:
                f(x)
            call = collections.defaultdict(float)
            for op, node, graph, tid, ts, dur, shape in p.events:
                call[(op, tuple(shape))] += dur
            for k, v in call.items(): per[k].append(v)
    res[name] = {k: statistics.median(v) for k, v in per.items()}
keys = sorted(set(res["fp32"]) | set(res["int8"]), key=lambda k: -res["fp32"].get(k, 0))
tf = ti = 0
for k in keys:
    a, c = res["fp32"].get(k, 0), res["int8"].get(k, 0); tf += a; ti += c
    print(f"{a/1e3:8.2f} {c/1e3:8.2f} ms  {c/a if a else 0:6.3f}  {k[0]:18s} {k[1]}")
print(f"total fp32 {tf/1e3:.2f} ms, int8 {ti/1e3:.2f} ms, {ti/tf:.3f}")
