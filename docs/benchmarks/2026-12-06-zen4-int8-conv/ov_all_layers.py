# OpenVINO's per-layer times (PERF_COUNT) for every executed layer of ResNet-50 INT8 (NNCF, 32
# calibration images) in execution order, with each layer's output shape, to set beside Zenith's
# per-node medians conv by conv. python ov_all_layers.py [batch]
import collections, statistics, sys, time, torch, torchvision, openvino as ov, nncf
torch.manual_seed(0)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(b, 3, 224, 224, generator=torch.Generator().manual_seed(100 + i)),) for i in range(max(1, 32 // b))]
with torch.no_grad():
    om = ov.convert_model(m, example_input=(x,))
qm = nncf.quantize(om, nncf.Dataset(cal, lambda t: [t[0].numpy()]), subset_size=len(cal))
cm = ov.compile_model(qm, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32",
                                  "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": True})
shapes = {}
for op in cm.get_runtime_model().get_ops():
    shapes[op.get_friendly_name()] = (tuple(op.get_output_partial_shape(0)) if op.get_output_size() else (),
                                      op.get_rt_info()["outputPrecisions"].astype(str) if "outputPrecisions" in op.get_rt_info() else "")
req = cm.create_infer_request(); feed = [x.numpy()]
for _ in range(5): req.infer(feed)
per = collections.defaultdict(list); kind = {}; order = []; ts = []
for _ in range(30):
    t = time.perf_counter(); req.infer(feed); ts.append(time.perf_counter() - t)
    for p in req.profiling_info:
        if p.status == p.Status.EXECUTED:
            if p.node_name not in per: order.append(p.node_name)
            per[p.node_name].append(p.real_time.total_seconds() * 1e6)
            kind[p.node_name] = (p.node_type, p.exec_type)
print(f"wall median {statistics.median(ts)*1e3:.2f} ms; sum of layer medians "
      f"{sum(statistics.median(v) for v in per.values())/1e3:.2f} ms")
for n in order:
    med = statistics.median(per[n])
    if med < 1: continue
    s, prec = shapes.get(n, ((), ""))
    print(f"{med:8.1f} us {kind[n][0]:14s} {kind[n][1]:24s} {str(s):28s} {prec:10s} {n[:40]}")
