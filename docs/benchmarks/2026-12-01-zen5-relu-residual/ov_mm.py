# One fp32 MatMul (128 x 768 @ 768 x 3072 + bias) in OpenVINO, 2 threads: GFLOP/s. Run with and without ONEDNN_MAX_CPU_ISA=AVX2.
import time, os, numpy as np, openvino as ov
import openvino.opset13 as ops
M, K, N = 128, 768, 3072
x = ops.parameter([M, K], np.float32)
w = ops.constant(np.random.randn(N, K).astype(np.float32) * 0.02)
y = ops.add(ops.matmul(x, w, False, True), ops.constant(np.zeros(N, np.float32)))
m = ov.Model([y], [x])
cm = ov.Core().compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"})
req = cm.create_infer_request(); a = np.random.randn(M, K).astype(np.float32)
for _ in range(20): req.infer([a])
ts = []
for _ in range(200):
    t = time.perf_counter(); req.infer([a]); ts.append(time.perf_counter() - t)
ts.sort(); t = ts[100]
print(f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA')}: {t*1e6:.0f} us, {2*M*N*K/t/1e9:.0f} GFLOP/s")
