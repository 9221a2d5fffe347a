# Does W's row stride (all 12 rows of a tile in one L1 set at ld 3072) cost the K-3072 GEMM? Same math, W stored with ld K vs K+pad.
import random, statistics, sys, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
M, N, K = map(int, sys.argv[1].split("x")); pads = [int(p) for p in sys.argv[2].split(",")]
x = torch.randn(M, K)
fs = {}
for pad in pads:
    lst = []
    for i in range(4):
        lin = torch.nn.Linear(K, N).eval()
        big = torch.randn(N, K + pad)
        big[:, :K] = lin.weight.detach()
        lin.weight = torch.nn.Parameter(big[:, :K], requires_grad=False)
        assert lin.weight.stride() == (K + pad, 1)
        lst.append(zenith.freeze(lin))
    fs[pad] = lst
res = {p: [] for p in pads}
with torch.no_grad():
    for p in pads:
        for f in fs[p]: f(x)  # captured before the timed rounds
    for r in range(int(sys.argv[3]) if len(sys.argv) > 3 else 15):
        for p in random.sample(pads, len(pads)):
            with zenith.profile(trace="/dev/null") as pr:
                for i in range(16): fs[p][i % 4](x)
            res[p].append(statistics.median(e[5] for e in pr.events if e[0] == "addmm"))
base = res[pads[0]]
for p in pads:
    rat = sorted(a / b for a, b in zip(res[p], base))
    us = statistics.median(res[p])
    print(f"{M}x{N}x{K} pad {p}: {us:.0f} us {2*M*N*K/us/1e3:.0f} GFLOP/s ratio {rat[len(rat)//2]:.3f} [{rat[len(rat)//4]:.3f}, {rat[3*len(rat)//4]:.3f}]")
