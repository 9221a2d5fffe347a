# OpenVINO's per-layer times for a torchvision model (PERF_COUNT), median of calls.
import sys, collections, torch, torchvision, numpy as np, openvino as ov
torch.manual_seed(0)
name, B = sys.argv[1], int(sys.argv[2])
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
with torch.no_grad(): om = ov.convert_model(m, example_input=(x,))
cm = ov.compile_model(om, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": "YES"})
req = cm.create_infer_request(); feed = [x.numpy()]
for _ in range(5): req.infer(feed)
per = collections.defaultdict(list); info = {}
import time
ts = []
for _ in range(15):
    t = time.perf_counter(); req.infer(feed); ts.append(time.perf_counter() - t)
    for p in req.get_profiling_info():
        if p.status == p.Status.EXECUTED:
            per[p.node_name].append(p.real_time.total_seconds() * 1e3); info[p.node_name] = (p.node_type, p.exec_type)
tot = 0
rows = []
for n, d in per.items():
    med = sorted(d)[len(d)//2]; tot += med; rows.append((med, n, info[n]))
order = {n: i for i, n in enumerate(per)}
for med, n, (t, e) in sorted(rows, key=lambda r: order[r[1]]):
    if med > 0.05: print(f"{med:7.3f} ms {t:<14} {e:<28} {n[:70]}")
print("total", round(tot, 3), "whole call median", round(sorted(ts)[7] * 1e3, 2))
