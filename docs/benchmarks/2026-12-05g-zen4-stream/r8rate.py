# One row of x (and 2, 4): GB/s of q4_0 qmatmul, weight hot (one weight, L3) and from memory
# (24 cycled), for TinyLlama's shapes; fp32 GEMV from memory in the same rounds. Run once with
# ZX_R8=0 and once with ZX_R8=1 (temporary switch: AVX-512 8-row kernels on Zen 4).
import time, torch, statistics, sys
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
torch.manual_seed(0)
fmt = sys.argv[1] if len(sys.argv) > 1 else "q4_0"
for N, K in [(5632, 2048), (2048, 5632), (2048, 2048), (256, 2048)]:
    a = [quantize_weight(torch.randn(N, K), fmt) for _ in range(24 if N > 256 else 96)]
    wf = [torch.randn(N, K) for _ in range(4 if N > 256 else 24)]
    def rate(ws, x, calls):
        t = time.perf_counter()
        for i in range(calls): _C.qmatmul(x, ws[i % len(ws)], fmt)
        return ws[0].numel() * calls / (time.perf_counter() - t) / 1e9
    def f32():
        t = time.perf_counter()
        for w in wf: _C.linear(x1, w, None)
        return len(wf) * N * K * 4 / (time.perf_counter() - t) / 1e9
    x1, x4 = torch.randn(1, K), torch.randn(4, K)
    res = {k: [] for k in ("hot", "mem", "hot4", "f32 mem")}
    for rep in range(9):
        res["hot"].append(rate(a[:1], x1, 100)); res["mem"].append(rate(a, x1, len(a)))
        res["hot4"].append(rate(a[:1], x4, 50)); res["f32 mem"].append(f32())
    print(f"{fmt} {N}x{K}: " + "; ".join(f"{k} {statistics.median(v):.1f}" for k, v in res.items()) + " GB/s")
