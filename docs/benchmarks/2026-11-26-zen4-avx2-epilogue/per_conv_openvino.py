# Per-conv time, Zenith (zenith.profile trace) against OpenVINO (its PERF_COUNT
# counters), the same torchvision model and batch, medians of 7 interleaved calls:
#   .venv/bin/python per_conv_openvino.py resnet50 8
# With ZENITH_NO_AVX512=1 ONEDNN_MAX_CPU_ISA=AVX2 both run their AVX2 kernels (OpenVINO's
# counters then name brgconv_avx2_*). The two lists pair by order; OpenVINO runs each
# stage's downsample conv before the block's first conv, so those two rows swap.
import sys, torch, zenith, torchvision, collections, statistics
import openvino as ov
torch.set_num_threads(2)
name, N = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
m = (torchvision.models.resnet50() if name == "resnet50" else torchvision.models.mobilenet_v2()).eval()
x = torch.randn(N, 3, 224, 224)
with torch.no_grad():
    om = ov.convert_model(m, example_input=(x,))
cm = ov.compile_model(om, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32",
                                  "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": "YES"})
req = cm.create_infer_request()
f = zenith.compile(m)
with torch.no_grad():
    for _ in range(3): f(x); req.infer([x.numpy()])
import time
ovt = collections.defaultdict(list); zt = collections.defaultdict(list)
ovw=[]; zw=[]; zc=collections.defaultdict(list); oc=collections.defaultdict(list)
for r in range(7):
    t=time.perf_counter(); req.infer([x.numpy()]); ovw.append(time.perf_counter()-t)
    per = collections.defaultdict(float)
    for i, pi in enumerate(req.profiling_info):
        if pi.real_time.total_seconds() > 0:
            per[(pi.node_type, pi.exec_type)] += pi.real_time.total_seconds()
    for k, v in per.items(): ovt[k].append(v)
    with torch.no_grad(), zenith.profile(trace='/tmp/exp/t.json') as p:
        t=time.perf_counter(); f(x); zw.append(time.perf_counter()-t)
    per = collections.defaultdict(float)
    for op, node, graph, tid, ts, dur, shape in p.events:
        per[op] += dur * 1e-6
        if op.startswith("conv"): zc[(node, tuple(shape))].append(dur*1e-3)
    for k, v in per.items(): zt[k].append(v)
    for pi in req.profiling_info:
        if pi.node_type == "Convolution": oc[pi.node_name].append(pi.real_time.total_seconds()*1e3)
print("wall ms OV %.2f  Zenith %.2f" % (1e3*statistics.median(ovw), 1e3*statistics.median(zw)))
print("OV:"); [print("  %-40s %8.2f" % (k, 1e3*statistics.median(v))) for k, v in sorted(ovt.items(), key=lambda kv: -statistics.median(kv[1]))[:15]]
print("Zenith:"); [print("  %-40s %8.2f" % (k, 1e3*statistics.median(v))) for k, v in sorted(zt.items(), key=lambda kv: -statistics.median(kv[1]))[:15]]

zl = [(k, statistics.median(v)) for k, v in zc.items()]
ol = [(k, statistics.median(v)) for k, v in oc.items()]
print(len(zl), len(ol))
for i in range(max(len(zl), len(ol))):
    a = zl[i] if i < len(zl) else ("", 0); b = ol[i] if i < len(ol) else ("", 0)
    print("%-28s %7.3f | %7.3f %s" % (a[0], a[1], b[1], b[0][:60]))
