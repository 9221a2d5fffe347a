import time, torch, sys, os
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
fmt = sys.argv[1] if len(sys.argv) > 1 else "q4_0"
torch.manual_seed(0)
for N, K in [(5632, 2048), (2048, 5632), (256, 2048)]:
    ws = [quantize_weight(torch.randn(N, K), fmt) for _ in range(16)]
    line = []
    for M in [int(v) for v in os.environ.get("MS", "2,4,8,12,16,32,64,128").split(",")]:
        x = torch.randn(M, K)
        for w in ws: _C.qmatmul(x, w, fmt)
        ts = []
        for rep in range(5):
            t = time.perf_counter()
            for w in ws: _C.qmatmul(x, w, fmt)
            ts.append((time.perf_counter() - t) / len(ws))
        t = sorted(ts)[2]
        line.append(f"M{M} {M * N * K / t / 1e9:.0f}")
    print(f"{fmt} {N}x{K} GMAC/s: " + "  ".join(line))
