# x @ W^T on 1 vs 2 threads, as a share of (threads x one core's FMA rate) measured right before: is the in-model loss a 2-core effect?
import random, statistics, sys, torch, zenith, zenith._C as C
torch.manual_seed(0)
def fma(): return next(r["gmacs"] for r in C.isa_mac_rates() if r["name"] == "fp32 fma (avx512)")
shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[1:]]  # MxNxK
lins = {s: ([zenith.freeze(torch.nn.Linear(s[2], s[1]).eval()) for _ in range(4)], torch.randn(s[0], s[2])) for s in shapes}
res = {}
with torch.no_grad():
    for s, (fs, x) in lins.items():
        for f in fs: f(x)
    for r in range(8):
        for s in shapes:
            for th in random.sample([1, 2], 2):
                torch.set_num_threads(th)
                fs, x = lins[s]
                pk = fma()
                with zenith.profile(trace="/dev/null") as p:
                    for i in range(16): fs[i % 4](x)
                us = statistics.median(e[5] for e in p.events if e[0] == "addmm")
                res.setdefault((s, th), []).append(s[0] * s[1] * s[2] / us / 1e3 / (th * pk))
for (s, th), v in sorted(res.items()):
    print(f"{s[0]}x{s[1]}x{s[2]} threads {th}: {statistics.median(v)*100:.1f}% of threads x core FMA [{min(v)*100:.1f}, {max(v)*100:.1f}]")
