# qmatmul (the eager binding, dot kernels, no packed weight) at 32..128 rows against torch fp32 linear.
import statistics, time, torch
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
def med(f, reps=50):
    for _ in range(5): f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
for M, N, K in [(128, 768, 768), (128, 3072, 768), (128, 768, 3072), (32, 384, 384), (128, 1536, 384)]:
    w = torch.randn(N, K) * 0.02; x = torch.randn(M, K)
    tf = med(lambda: torch.nn.functional.linear(x, w))
    row = f"M={M} N={N} K={K}: torch fp32 {tf*1e6:7.1f} us ({2*M*N*K/tf/1e9:5.1f} GF/s)"
    for fmt in ("int8", "q8_0", "int4_g128"):
        q = quantize_weight(w, fmt)
        t = med(lambda: _C.qmatmul(x, q, fmt))
        row += f" | {fmt} {t*1e6:7.1f} us ({tf/t:4.2f}x)"
    print(row)
