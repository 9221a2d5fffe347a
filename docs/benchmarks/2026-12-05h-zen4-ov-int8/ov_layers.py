# OpenVINO's own per-layer times (PERF_COUNT) for ResNet-50 INT8 (NNCF, the bench's
# calibration: 32 images) at batch 1, 2 threads: which kernels (exec_type) its int8 convs run and
# how long each takes, beside Zenith's per-node medians (int8_nodes.py of 2026-12-05c-zen4).
# python ov_layers.py [batch]
import collections, statistics, sys, time, torch, torchvision, numpy as np, openvino as ov, nncf
torch.manual_seed(0)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(b, 3, 224, 224, generator=torch.Generator().manual_seed(100 + i)),) for i in range(max(1, 32 // b))]
with torch.no_grad():
    om = ov.convert_model(m, example_input=(x,))
qm = nncf.quantize(om, nncf.Dataset(cal, lambda t: [t[0].numpy()]), subset_size=len(cal))
cm = ov.compile_model(qm, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32",
                                  "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": True})
req = cm.create_infer_request()
feed = [x.numpy()]
for _ in range(5): req.infer(feed)
per = collections.defaultdict(list); kind = {}
ts = []
for _ in range(20):
    t = time.perf_counter(); req.infer(feed); ts.append(time.perf_counter() - t)
    for p in req.profiling_info:
        if p.status == p.Status.EXECUTED:
            per[p.node_name].append(p.real_time.total_seconds() * 1e6)
            kind[p.node_name] = (p.node_type, p.exec_type)
print(f"wall median {statistics.median(ts)*1e3:.2f} ms")
by = collections.defaultdict(float); tot = 0
rows = []
for n, v in per.items():
    med = statistics.median(v); tot += med; by[kind[n]] += med; rows.append((med, kind[n], n))
print(f"sum of layer medians {tot/1e3:.2f} ms")
for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {v/1e3:7.2f} ms  {k}")
for med, k, n in sorted(rows, reverse=True)[:25]:
    print(f"  {med:7.1f} us {k[0]:14s} {k[1]:32s} {n[:60]}")
