# q4_0 qmatmul at TinyLlama's shapes, 2 threads: 1 row hot (one weight, in L3) and cold (48 weights cycled),
# 16 rows (prefill) cold; fp32 GEMV (Zenith's SGEMM, 1 row) cold in the same rounds. Medians of 7 rounds.
import time, torch, sys
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
fmt = sys.argv[1] if len(sys.argv) > 1 else "q4_0"
shapes = [(5632, 2048), (2048, 5632)]
torch.manual_seed(0)
res = {}
for N, K in shapes:
    wf = [torch.randn(N, K) for _ in range(6)]
    wq = [quantize_weight(w, fmt) for w in wf] * 4 + [quantize_weight(torch.randn(N, K), fmt) for _ in range(24)]
    x1, x16 = torch.randn(1, K), torch.randn(16, K)
    qb = wq[0].numel()
    def hot():
        for _ in range(40): _C.qmatmul(x1, wq[0], fmt)
        return 40 * qb
    def cold():
        for w in wq: _C.qmatmul(x1, w, fmt)
        return len(wq) * qb
    def pre():
        for w in wq[:16]: _C.qmatmul(x16, w, fmt)
        return 16 * qb
    def f32():
        for w in wf: _C.linear(x1, w, None)
        return len(wf) * N * K * 4
    fs = dict(hot=hot, cold=cold, pre16=pre, f32=f32)
    for f in fs.values(): f()
    r = {k: [] for k in fs}
    for rep in range(7):
        for k, f in fs.items():
            t = time.perf_counter(); b = f(); r[k].append((time.perf_counter() - t, b))
    out = []
    for k, v in r.items():
        v.sort(); t, b = v[len(v) // 2]
        n = b / qb if k != "f32" else None
        if k == "pre16": out.append(f"pre16 {t / n * 1e6:.0f} us ({16 * N * K / (t / n) / 1e9:.0f} GMAC/s)")
        elif k == "f32": out.append(f"f32 {b / t / 1e9:.1f} GB/s")
        else: out.append(f"{k} {t / n * 1e6:.0f} us ({b / t / 1e9:.1f} GB/s)")
    print(f"{fmt} {N}x{K}: " + ", ".join(out))
