# The same GEMM shapes with weights hot (one B, repeated) and cold (12 distinct Bs in turn, as a model's layers):
# does streaming the weights cost the in-model GEMMs their rate? python gemm_cold.py
import sys, time, torch
from zenith import _C
from zenith.bench.machine import zenith_mm
torch.set_num_threads(2); _C.set_num_threads(2)
shapes = [(128, 768, 3072), (128, 3072, 768), (128, 768, 768), (128, 384, 384)]
for m, n, k in shapes:
    L = 12
    A = torch.randn(m, k)
    zs = [zenith_mm(A, torch.randn(k, n), True) for _ in range(L)]
    ts = [lambda B=torch.randn(k, n): torch.mm(A, B) for _ in range(L)]
    for f in zs + ts: f()
    out = {}
    for name, fs in (("zenith hot", zs[:1] * L), ("zenith cold", zs), ("torch hot", ts[:1] * L), ("torch cold", ts)):
        best = []
        for r in range(7):
            t0 = time.perf_counter()
            for f in fs: f()
            best.append((time.perf_counter() - t0) / L)
        out[name] = 2 * m * n * k / sorted(best)[3] / 1e9
    print(f"{m}x{n}x{k}: " + ", ".join(f"{k_} {v:.0f}" for k_, v in out.items()) + " GFLOP/s")
