# 16 rows of x (TinyLlama's prompt) through q4_0 qmatmul: GMAC/s per shape, weights hot
# (one weight) and cold (16 cycled). python pf16.py [M] [reps]
import time, torch, sys
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
torch.manual_seed(0)
M = int(sys.argv[1]) if len(sys.argv) > 1 else 16
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
out = []
for N, K in [(5632, 2048), (2048, 5632), (2048, 2048), (256, 2048)]:
    ws = [quantize_weight(torch.randn(N, K), "q4_0") for _ in range(16)]
    x = torch.randn(M, K)
    for name, use in (("hot", ws[:1] * 16), ("cold", ws)):
        for w in use: _C.qmatmul(x, w, "q4_0")
        ts = []
        for rep in range(reps):
            t = time.perf_counter()
            for w in use: _C.qmatmul(x, w, "q4_0")
            ts.append((time.perf_counter() - t) / len(use))
        t = sorted(ts)[len(ts) // 2]
        out.append(f"{N}x{K} {name} {M * N * K / t / 1e9:.0f}")
print(f"M={M} GMAC/s: " + "; ".join(out))
