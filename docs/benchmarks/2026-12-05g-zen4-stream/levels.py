# One row of x: GB/s of weight bytes for Zenith's fp32 GEMV and q4_0 / int8 qmatmul with the
# weights in L2 (N 512, one weight repeated), L3 (N 5632, one weight repeated) and memory
# (N 5632, 48 weights cycled); K 2048, 2 threads. python levels.py
import time, torch, statistics
from zenith import _C
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2); _C.set_num_threads(2)
torch.manual_seed(0)
K = 2048
x = torch.randn(1, K)
def rate(ws, f, nbytes, calls=400):
    for w in ws[:4]: f(w)
    ts = []
    for rep in range(7):
        t = time.perf_counter()
        for i in range(calls): f(ws[i % len(ws)])
        ts.append((time.perf_counter() - t) / calls)
    return nbytes / statistics.median(ts) / 1e9
fmts = {"fp32": (lambda N: torch.randn(N, K), lambda w: _C.linear(x, w, None), lambda N: N * K * 4),
        "q4_0": (lambda N: quantize_weight(torch.randn(N, K), "q4_0"), lambda w: _C.qmatmul(x, w, "q4_0"), lambda N: N * K * 18 // 32),
        "int8": (lambda N: quantize_weight(torch.randn(N, K), "int8"), lambda w: _C.qmatmul(x, w, "int8"), lambda N: N * (K + 4))}
for name, (mk, f, nb) in fmts.items():
    l2 = rate([mk(512)], f, nb(512), 2000)
    l3 = rate([mk(1024 if name == "fp32" else 5632)], f, nb(1024 if name == "fp32" else 5632))
    n_cold = 6 if name == "fp32" else 24
    mem = rate([mk(5632) for _ in range(n_cold)], f, nb(5632), 60)
    print(f"{name}: L2 {l2:.1f} GB/s, L3 {l3:.1f}, memory {mem:.1f}")
