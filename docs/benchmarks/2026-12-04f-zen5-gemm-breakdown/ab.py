# In-process A/B of weight-rows driver variants (ZENITH_AB_DYN read per call), kernel time from zenith.profile.
import os, random, statistics, sys, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
modes = sys.argv[1].split(",")
shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[2:]]  # MxKxN
lins = {s: ([zenith.freeze(torch.nn.Linear(s[1], s[2]).eval()) for _ in range(4)], torch.randn(s[0], s[1])) for s in shapes}
res = {(s, m): [] for s in shapes for m in modes}
with torch.no_grad():
    for s, (fs, x) in lins.items():
        ref = torch.nn.functional.linear(x, fs[0]._module.weight, fs[0]._module.bias) if hasattr(fs[0], "_module") else None
        outs = []
        for m in modes:
            os.environ["ZENITH_AB_DYN"] = m; outs.append(fs[0](x))
        for o in outs[1:]: assert torch.equal(o, outs[0]) or (o - outs[0]).abs().max() < 1e-3, (o - outs[0]).abs().max()
    for r in range(int(os.environ.get("ROUNDS", 15))):
        for s in random.sample(shapes, len(shapes)):
            fs, x = lins[s]
            for m in random.sample(modes, len(modes)):
                os.environ["ZENITH_AB_DYN"] = m
                with zenith.profile(trace="/dev/null") as p:
                    for i in range(16): fs[i % 4](x)
                res[(s, m)].append(statistics.median(e[5] for e in p.events if e[0] == "addmm"))
for s in shapes:
    base = res[(s, modes[0])]
    line = f"{s[0]}x{s[2]}x{s[1]} (MxNxK) {modes[0]}: {statistics.median(base):.0f} us"
    for m in modes[1:]:
        rat = sorted(a / b for a, b in zip(res[(s, m)], base))
        line += f" | {m}: {statistics.median(res[(s, m)]):.0f} us ratio {rat[len(rat)//2]:.3f} [{rat[len(rat)//4]:.3f}, {rat[3*len(rat)//4]:.3f}]"
    print(line)
