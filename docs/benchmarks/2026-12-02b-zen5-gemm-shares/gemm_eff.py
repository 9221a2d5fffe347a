# Zenith (packed B) and torch.mm at transformer GEMM shapes and 2048^3, one process, 2 threads: GFLOP/s per shape
# (median of rounds) and its share of Zenith's own 2048^3 rate. python gemm_eff.py [rounds]
import sys, time, torch
from zenith import _C
from zenith.bench.machine import zenith_mm
torch.set_num_threads(2); _C.set_num_threads(2)
shapes = [(128, 384, 384), (128, 1536, 384), (128, 384, 1536), (128, 1152, 384), (128, 768, 768), (128, 3072, 768), (128, 768, 3072), (2048, 2048, 2048)]
fns = {}
for m, n, k in shapes:
    A, B = torch.randn(m, k), torch.randn(k, n)
    fns[(m, n, k)] = (zenith_mm(A, B, True), lambda A=A, B=B: torch.mm(A, B))
res = {s: ([], []) for s in shapes}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
    for s, (z, t) in fns.items():
        reps = max(3, int(3e8 / (2 * s[0] * s[1] * s[2])))
        for j, f in enumerate((z, t)):
            f()
            t0 = time.perf_counter()
            for _ in range(reps): f()
            res[s][j].append((time.perf_counter() - t0) / reps)
peak = 2 * 2048**3 / sorted(res[(2048, 2048, 2048)][0])[len(res[(2048,2048,2048)][0]) // 2] / 1e9
for s, (z, t) in res.items():
    zm, tm = sorted(z)[len(z) // 2], sorted(t)[len(t) // 2]
    fl = 2 * s[0] * s[1] * s[2]
    print(f"{s}: zenith {fl / zm / 1e9:6.1f} GFLOP/s ({fl / zm / 1e9 / peak:.0%} of zenith 2048^3 {peak:.0f}), torch.mm {fl / tm / 1e9:6.1f}")
