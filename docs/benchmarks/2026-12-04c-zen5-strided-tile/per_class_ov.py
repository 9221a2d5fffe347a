# Per conv class, Zenith (zenith.freeze, zenith.profile) against OpenVINO (PERF_COUNT), ResNet-50,
# same weights and batch, 2 threads, calls interleaved; medians over the calls. OpenVINO runs each
# stage's downsample before the block's first conv: its block-0 order is ds, c1, c2, c3.
import sys, os, time, collections, statistics, torch, torchvision, zenith
import openvino as ov
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from r50flops import table
torch.set_num_threads(2); torch.manual_seed(0)
N = int(sys.argv[1]); calls = int(sys.argv[2]) if len(sys.argv) > 2 else 9
m = torchvision.models.resnet50().eval(); x = torch.randn(N, 3, 224, 224)
with torch.no_grad(): om = ov.convert_model(m, example_input=(x,))
cm = ov.compile_model(om, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32",
                                  "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": "YES"})
req = cm.create_infer_request(); f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): f(x); req.infer([x.numpy()])
zc = collections.defaultdict(list); oc = collections.defaultdict(list); zw = []; ow = []; zo = collections.defaultdict(list); oo = collections.defaultdict(list)
for r in range(calls):
    t = time.perf_counter(); req.infer([x.numpy()]); ow.append(time.perf_counter() - t)
    other = collections.defaultdict(float)
    for pi in req.profiling_info:
        if pi.node_type == "Convolution": oc[pi.node_name].append(pi.real_time.total_seconds() * 1e3)
        elif pi.real_time.total_seconds() > 0: other[pi.node_type] += pi.real_time.total_seconds() * 1e3
    for k, v in other.items(): oo[k].append(v)
    with torch.no_grad(), zenith.profile(trace=os.devnull) as p:
        t = time.perf_counter(); f(x); zw.append(time.perf_counter() - t)
    other = collections.defaultdict(float)
    for op, node, graph, tid, ts, dur, shape in p.events:
        if op.startswith("conv"): zc[node].append(dur * 1e-3)
        else: other[op] += dur * 1e-3
    for k, v in other.items(): zo[k].append(v)
tab = table(N)
zl = [statistics.median(v) for v in zc.values()]; ol = [statistics.median(v) for v in oc.values()]
assert len(zl) == len(ol) == len(tab), (len(zl), len(ol), len(tab))
# reorder OV's block-0 (ds, c1, c2, c3) to Zenith's (c1, c2, c3, ds)
i = 0; olr = []
while i < len(tab):
    if ".0.c1" in tab[i][0] and i + 3 < len(tab) and ".ds" in tab[i + 3][0]:
        olr += [ol[i + 1], ol[i + 2], ol[i + 3], ol[i]]; i += 4
    else: olr.append(ol[i]); i += 1
cls = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
for (name, fl), z, o in zip(tab, zl, olr):
    k = name.split()[1] + (" s2" if " s2 " in name else "") + " @" + name.split("@")[1]
    cls[k][0] += z; cls[k][1] += o; cls[k][2] += fl
    if "-v" in sys.argv: print(f"  {name:<32} Z {z:7.3f}  OV {o:7.3f}  Z/OV {z/o:5.2f}")
print(f"ResNet-50 batch {N}: wall Zenith {statistics.median(zw)*1e3:.2f} ms  OpenVINO {statistics.median(ow)*1e3:.2f} ms")
print(f"{'class':<14} {'Zenith ms':>9} {'OV ms':>8} {'Z/OV':>5} {'Z GF/s':>7} {'OV GF/s':>7}")
for k, (z, o, fl) in sorted(cls.items(), key=lambda kv: -kv[1][0]):
    print(f"{k:<14} {z:9.3f} {o:8.3f} {z/o:5.2f} {fl/z/1e6:7.0f} {fl/o/1e6:7.0f}")
print("conv total", round(sum(zl), 3), round(sum(ol), 3))
print("Zenith other", {k: round(statistics.median(v), 3) for k, v in zo.items()})
print("OV other", {k: round(statistics.median(v), 3) for k, v in oo.items()})
