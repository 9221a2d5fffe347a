# One x @ W^T of 3N rows against three of N rows (Q, K, V as one GEMM?), kernel time per call, shuffled rounds.
import random, statistics, sys, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
M, H = map(int, sys.argv[1].split("x"))
x = torch.randn(M, H)
one = [zenith.freeze(torch.nn.Linear(H, 3 * H).eval()) for _ in range(4)]
three = [[zenith.freeze(torch.nn.Linear(H, H).eval()) for _ in range(3)] for _ in range(4)]
res = {"one": [], "three": []}
with torch.no_grad():
    for f in one: f(x)
    for fs in three:
        for f in fs: f(x)
    for r in range(15):
        for mode in random.sample(["one", "three"], 2):
            with zenith.profile(trace="/dev/null") as p:
                for i in range(12):
                    if mode == "one": one[i % 4](x)
                    else:
                        for f in three[i % 4]: f(x)
            d = [e[5] for e in p.events if e[0] == "addmm"]
            res[mode].append(sum(d) / 12)
rat = sorted(a / b for a, b in zip(res["one"], res["three"])); n = len(rat)
print(f"{M}x{3*H}x{H} as one: {statistics.median(res['one']):.1f} us; three {M}x{H}x{H}: {statistics.median(res['three']):.1f} us; one/three {rat[n//2]:.3f} [{rat[n//4]:.3f}, {rat[3*n//4]:.3f}]")
