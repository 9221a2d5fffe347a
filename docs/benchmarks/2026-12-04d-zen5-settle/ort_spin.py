# ONNX Runtime with its pool's spinning on (its default) against off, ResNet-50, the same exported file,
# calls alternating, each after stats.settle().
import sys, os, tempfile, time, random, statistics, torch, torchvision
import onnxruntime as ort
from zenith.bench import stats
torch.set_num_threads(2); torch.manual_seed(0)
B = int(sys.argv[1]); rounds = int(sys.argv[2])
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
tmp = tempfile.mkdtemp(); path = os.path.join(tmp, "m.onnx")
with torch.no_grad(): torch.onnx.export(m, (x,), path, input_names=["input_0"], dynamo=True, optimize=True, verbose=False)
def sess(spin):
    so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]); feed = {"input_0": x.numpy()}
    return lambda: s.run(None, feed)
fns = {"spin": sess(True), "nospin": sess(False)}
for f in fns.values():
    for _ in range(3): f()
times = stats.paired_rounds(fns, rounds)
r, lo, hi = stats.paired_ratio_ci(times["nospin"], times["spin"])
print(f"batch {B}: spin {statistics.median(times['spin'])*1e3:.2f} ms, off {statistics.median(times['nospin'])*1e3:.2f} ms, spin/off {r:.3f} [{lo:.3f}, {hi:.3f}]")
for name in ("nospin", "spin", "nospin", "spin"):
    ts = []; ws = []
    for _ in range(15):
        ws.append(stats.settle()); t = time.perf_counter(); fns[name](); ts.append(time.perf_counter() - t)
    print(name, "alone, settled:", round(statistics.median(ts) * 1e3, 2), "ms; settle waited", round(statistics.median(ws) * 1e3, 1), "ms")
