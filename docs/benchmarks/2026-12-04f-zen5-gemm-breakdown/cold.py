# Isolated Linear: same weights every call (B in L3) vs rotating through 24 Linears (B from DRAM). Kernel time from zenith.profile.
import statistics, sys, torch, zenith, zenith._C as C
torch.manual_seed(0); torch.set_num_threads(2)
M, K, N = map(int, sys.argv[1].split("x"))
lins = [zenith.freeze(torch.nn.Linear(K, N).eval()) for _ in range(24)]
x = torch.randn(M, K)
def fma(): return next(r["gmacs"] for r in C.isa_mac_rates() if r["name"] == "fp32 fma (avx512)")
res = {"hot": [], "cold": []}
with torch.no_grad():
    for f in lins: f(x)
    for r in range(10):
        peak = 4 * fma()
        for mode in ("hot", "cold"):
            with zenith.profile(trace="/dev/null") as p:
                for i in range(48):
                    (lins[0] if mode == "hot" else lins[i % 24])(x)
            g = p.gemm_rates(48)[0]["gflops"]
            res[mode].append(g / peak)
for k, v in res.items(): print(M, N, K, k, f"{statistics.median(v)*100:.1f}%")
