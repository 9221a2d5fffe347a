# One row of x, weights cold (cycled): GB/s of Zenith's fp32 GEMV, q4_0 and int8 qmatmul,
# rounds alternated in one process. argv: N K
import time, torch, sys, statistics
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
torch.manual_seed(0)
N, K = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(1, K)
sets = {
    "fp32": ([torch.randn(N, K) for _ in range(8)], lambda w: _C.linear(x, w, None), N * K * 4),
    "q4_0": ([quantize_weight(torch.randn(N, K), "q4_0") for _ in range(48)], lambda w: _C.qmatmul(x, w, "q4_0"), None),
    "int8": ([quantize_weight(torch.randn(N, K), "int8") for _ in range(24)], lambda w: _C.qmatmul(x, w, "int8"), None),
}
def run(name):
    ws, f, nbytes = sets[name]
    nbytes = nbytes or ws[0].numel()
    t = time.perf_counter()
    for w in ws: f(w)
    dt = (time.perf_counter() - t) / len(ws)
    return dt, nbytes / dt / 1e9
for n in sets: run(n)
res = {n: [] for n in sets}
names = list(sets)
for rep in range(15):
    order = names if rep % 2 == 0 else names[::-1]
    for n in order: res[n].append(run(n))
md = statistics.median
print(f"{N}x{K}: " + "; ".join(f"{n} {md(r[0] for r in v)*1e6:.0f} us {md(r[1] for r in v):.1f} GB/s" for n, v in res.items()))
