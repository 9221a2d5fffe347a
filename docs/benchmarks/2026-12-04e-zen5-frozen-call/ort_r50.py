# ResNet-50 b1, 2 threads: ONNX Runtime per-node medians (its profiler) beside Zenith frozen's (zenith.profile),
# by the frozen graph's conv order (r50flops.table); back to back.
import os, sys, json, tempfile, statistics, collections, torch, torchvision, zenith
import onnxruntime as ort
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-04c-zen5-strided-tile")); from r50flops import table
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]) if len(sys.argv) > 1 else 1
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
f = zenith.freeze(m)
tmp = tempfile.mkdtemp(); path = os.path.join(tmp, "m.onnx")
with torch.no_grad():
    torch.onnx.export(m, (x,), path, input_names=["input_0"], dynamo=True, optimize=True, verbose=False)
so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.enable_profiling = True; so.profile_file_prefix = os.path.join(tmp, "prof")
sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
feed = {"input_0": x.numpy()}
N = int(os.environ.get("CALLS", 30))
with torch.no_grad():
    for _ in range(5): f(x); sess.run(None, feed)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(N): f(x)
    for _ in range(N): sess.run(None, feed)
ev = json.load(open(sess.end_profiling()))
on = collections.OrderedDict()
for e in ev:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        on.setdefault(e["name"][:-12], []).append((e["dur"], e["args"].get("op_name"), [list(d.values())[0] for d in e["args"].get("output_type_shape", [])]))
ort_convs = [(k + " " + str(v[0][2]), statistics.median(d for d, _, _ in v[5:])) for k, v in on.items() if v[0][1] in ("Conv", "FusedConv")]
ort_other = {k: statistics.median(d for d, _, _ in v[5:]) for k, v in on.items() if v[0][1] not in ("Conv", "FusedConv")}
per = collections.defaultdict(list); info = {}
for op, node, graph, tid, ts, dur, shape in p.events:
    per[node].append(dur); info[node] = op
zc = [n for n in per if info[n].startswith("conv2d")]
tab = table(B)
print(len(tab), len(zc), len(ort_convs))
cls = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
for (name, fl), n, (on_name, od) in zip(tab, zc, ort_convs):
    zm = statistics.median(per[n]) / 1e3; om = od / 1e3
    k = name.split()[1] + (" s2" if " s2 " in name else "") + " @" + name.split("@")[1]
    cls[k][0] += zm; cls[k][1] += om; cls[k][2] += fl
    if "-v" in sys.argv: print(f"{name:<32} Z {zm:7.3f} ORT {om:7.3f} {on_name}")
print(f"{'class':<14}{'Zenith ms':>10}{'ORT ms':>9}{'Z/ORT':>7}{'Z GF/s':>8}{'ORT GF/s':>9}")
for k, (zm, om, fl) in sorted(cls.items(), key=lambda kv: -kv[1][1]):
    print(f"{k:<14}{zm:10.3f}{om:9.3f}{zm/om:7.2f}{fl/zm/1e6:8.0f}{fl/om/1e6:9.0f}")
print("conv total", round(sum(v[0] for v in cls.values()), 3), round(sum(v[1] for v in cls.values()), 3))
print("Zenith other", {info[n]: round(statistics.median(per[n]) / 1e3, 3) for n in per if not info[n].startswith("conv2d")})
print("ORT other", {k[:30]: round(v / 1e3, 3) for k, v in ort_other.items()})
