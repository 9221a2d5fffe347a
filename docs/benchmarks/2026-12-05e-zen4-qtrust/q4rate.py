import time, torch, sys
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
fmt = sys.argv[1] if len(sys.argv) > 1 else "q4_0"
N, K = 5632, 2048
ws = [quantize_weight(torch.randn(N, K), fmt) for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 12)]
x = torch.randn(1, K)
nbytes = ws[0].numel()
for name, pool in (("hot", ws[:1]), ("cold", ws)):
    for _ in range(20):
        for w in pool: _C.qmatmul(x, w, fmt, None, None, False)
    best = []
    for rep in range(7):
        t0 = time.perf_counter(); n = 0
        for _ in range(max(1, 60 // len(pool))):
            for w in pool: _C.qmatmul(x, w, fmt, None, None, False); n += 1
        best.append((time.perf_counter() - t0) / n)
    best.sort(); t = best[len(best)//2]
    print(f"{fmt} {name}: {t*1e6:.1f} us a call, {nbytes/t/1e9:.1f} GB/s, {t*1e9/(N*K/32)*2:.3f} ns per 32 values per thread")
