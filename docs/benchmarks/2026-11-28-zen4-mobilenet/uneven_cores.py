# Zenith and OpenVINO on MobileNet V2, interleaved rounds in one process (same weights,
# input, 2 threads); run it with and without a CPU hog on one core, e.g.
# `taskset -c 1 sh -c 'while :; do :; done' &`, to see how each engine copes with one
# core running slower than the other.  python uneven_cores.py <batch> <rounds>
import sys, time, torch, torchvision, zenith
import openvino as ov
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); R = int(sys.argv[2])
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(B, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    ref = m(x)
    om = ov.convert_model(m, example_input=(x,))
cm = ov.compile_model(om, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32",
                                  "PERFORMANCE_HINT": "LATENCY"})
req = cm.create_infer_request(); feed = [x.numpy()]
def med(f, n=10):
    for _ in range(2): f()
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[n // 2] * 1e3
with torch.no_grad():
    out = c(x)
    print("zenith relerr", ((out - ref).abs().max() / ref.abs().max()).item())
    for r in range(R):
        z = med(lambda: c(x)); o = med(lambda: req.infer(feed))
        print(f"round {r}: zenith {z:.2f} ms, openvino {o:.2f} ms, ratio {z / o:.2f}", flush=True)
