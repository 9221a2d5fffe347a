# GEMM share of the FMA ceiling, interleaved per round: nn.Linear frozen by Zenith vs 2 x one core's fp32 FMA rate.
import random, statistics, sys, time, torch, zenith, zenith._C as C
torch.manual_seed(0); torch.set_num_threads(2)
shapes = [(128, 768, 768), (128, 768, 3072), (128, 3072, 768), (32, 384, 1536), (32, 1536, 384), (128, 384, 1536), (128, 1536, 384)]
if len(sys.argv) > 1: shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[1:]]
mods = {}
for (M, K, N) in shapes:
    lin = torch.nn.Linear(K, N).eval(); x = torch.randn(M, K)
    f = zenith.freeze(lin)
    with torch.no_grad():
        y = f(x); assert torch.allclose(y, lin(x), atol=1e-3, rtol=1e-3)
    mods[(M, K, N)] = (f, x)
def fma():
    return next(r["gmacs"] for r in C.isa_mac_rates() if r["name"] == "fp32 fma (avx512)")
share = {s: [] for s in shapes}; gf = {s: [] for s in shapes}
with torch.no_grad():
    for r in range(15):
        peak = fma()
        for s in random.sample(shapes, len(shapes)):
            f, x = mods[s]; ts = []
            for _ in range(30):
                t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
            g = 2 * s[0] * s[1] * s[2] / min(ts) / 1e9
            gf[s].append(g); share[s].append(g / (4 * peak))
        peak2 = fma()
for s in shapes:
    print(f"{s[0]}x{s[2]}x{s[1]} (MxNxK): {statistics.median(gf[s]):.0f} GFLOP/s, share of 2x FMA {statistics.median(share[s])*100:.1f}% "
          f"[{sorted(share[s])[3]*100:.1f}, {sorted(share[s])[-4]*100:.1f}]")
