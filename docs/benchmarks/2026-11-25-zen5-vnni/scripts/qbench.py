# Quantized GEMV, one row of x, cold weights (copies over 128 MiB): median time and bytes read per second.
# Usage: python qbench.py THREADS FORMATS   (ZENITH_NO_AVX512=1 for the AVX2 kernels)
import sys, statistics, time, torch
from zenith import _C
from zenith.quant.formats import quantize_weight
th = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.set_num_threads(th); _C.set_num_threads(th)
shapes = [(2048, 2048), (5632, 2048), (2048, 5632), (32000, 2048)]
fmts = sys.argv[2].split(",") if len(sys.argv) > 2 else ["int8", "q4_0"]
def med(fns, reps):
    for f in fns[:3]: f()
    ts = []
    for i in range(reps):
        f = fns[i % len(fns)]; t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
print("isa", _C.qmatmul_isa(), "threads", th)
for N, K in shapes:
    w = torch.randn(N, K) * 0.02
    x = torch.randn(1, K)
    for fmt in fmts:
        q = quantize_weight(w, fmt)
        copies = max(1, (128 << 20) // q.numel())
        qs = [q.clone() for _ in range(copies)]
        t = med([lambda q=q_: _C.qmatmul(x, q, fmt) for q_ in qs], 200 if N < 30000 else 30)
        print(f"{fmt:6s} {N}x{K}: {t*1e6:8.1f} us  {q.numel()/t/1e9:5.1f} GB/s")
