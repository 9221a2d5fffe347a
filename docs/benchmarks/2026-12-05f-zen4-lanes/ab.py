# A/B in one process: q4_0 vs q4_0x8 one row of x, weights cold (48 weights cycled), rounds alternated;
# also fp32 GEMV rate in each round. Prints median us per call and the per-round ratio x8/q4_0.
import time, torch, sys, statistics
from zenith import _C
from zenith.quant.formats import quantize_weight, interleave_x8
torch.set_num_threads(2); _C.set_num_threads(2)
torch.manual_seed(0)
M = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for N, K in [(5632, 2048), (2048, 5632)]:
    a = [quantize_weight(torch.randn(N, K), "q4_0") for _ in range(40)]
    b = [interleave_x8(w) for w in a]
    wf = [torch.randn(N, K) for _ in range(4)]
    x = torch.randn(M, K)
    def run(ws, fmt):
        t = time.perf_counter()
        for w in ws: _C.qmatmul(x, w, fmt)
        return (time.perf_counter() - t) / len(ws)
    def f32():
        t = time.perf_counter()
        for w in wf: _C.linear(x, w, None)
        return len(wf) * N * K * 4 / (time.perf_counter() - t) / 1e9
    run(a, "q4_0"); run(b, "q4_0x8"); f32()
    ta, tb, r, fr = [], [], [], []
    for rep in range(15):
        if rep % 2:
            u = run(b, "q4_0x8"); v = run(a, "q4_0")
        else:
            v = run(a, "q4_0"); u = run(b, "q4_0x8")
        ta.append(v); tb.append(u); r.append(u / v); fr.append(f32())
    md = statistics.median
    nb = a[0].numel()
    print(f"M={M} {N}x{K}: q4_0 {md(ta)*1e6:.0f} us ({nb/md(ta)/1e9:.1f} GB/s), q4_0x8 {md(tb)*1e6:.0f} us "
          f"({nb/md(tb)/1e9:.1f} GB/s); x8/q4_0 median {md(r):.3f} [{sorted(r)[3]:.3f}, {sorted(r)[11]:.3f}]; f32 {md(fr):.1f} GB/s")
