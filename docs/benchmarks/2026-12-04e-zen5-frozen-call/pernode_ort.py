# MobileNet V2 b1, 2 threads: per-node median times of Zenith (frozen) and ONNX Runtime, back to back.
import torch, torchvision, zenith, json, os, tempfile, statistics, collections
import onnxruntime as ort
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
tmp = tempfile.mkdtemp(); path = os.path.join(tmp, "m.onnx")
with torch.no_grad():
    torch.onnx.export(m, (x,), path, input_names=["input_0"], dynamo=True, optimize=True, verbose=False)
so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.enable_profiling = True; so.profile_file_prefix = os.path.join(tmp, "prof")
sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
feed = {"input_0": x.numpy()}
N = 200
with torch.no_grad():
    for _ in range(10): f(x); sess.run(None, feed)
    with zenith.profiler.profile(trace=os.path.join(tmp, "z.json")) as p:
        for _ in range(N): f(x)
    for _ in range(N): sess.run(None, feed)
pf = sess.end_profiling()
ev = json.load(open(pf))
ort_nodes = collections.OrderedDict()
for e in ev:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        ort_nodes.setdefault(e["name"][:-12], []).append((e["dur"], e["args"].get("op_name"), e["args"].get("output_type_shape")))
z_nodes = collections.OrderedDict()
for (op, node, graph, tid, ts, dur, shape) in p.events:
    z_nodes.setdefault(node, []).append((dur, op, shape))
print("ZENITH")
zt = 0
for k, v in z_nodes.items():
    med = statistics.median(d for d, _, _ in v); zt += med
    print(f"{med:8.1f} {v[0][1]:<16} {list(v[0][2])} {k}")
print("zenith sum", zt)
print("ORT")
ot = 0
for k, v in ort_nodes.items():
    med = statistics.median(d for d, _, _ in v[10:]); ot += med
    print(f"{med:8.1f} {v[0][1]:<16} {str(v[0][2])[:60]} {k[:40]}")
print("ort sum", ot)
