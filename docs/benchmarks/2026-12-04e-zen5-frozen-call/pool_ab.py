# Two frozen copies of one torchvision model, compiled with and without a compile-time switch (env var read by
# the layout pass): A = new (switch unset), B = old (ZENITH_AB_NOPOOL=1); calls alternate in shuffled order,
# each after stats.settle and back to back; per-round A/B ratio, median and 95% bootstrap interval.
import os, sys, time, random, statistics, torch, torchvision, zenith
from zenith.bench import stats
torch.manual_seed(0); torch.set_num_threads(2)
name, B, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
a = zenith.freeze(m)
with torch.no_grad(): ya = a(x)
os.environ["ZENITH_AB_NOPOOL"] = "1"
b = zenith.freeze(m)
with torch.no_grad(): yb = b(x)
del os.environ["ZENITH_AB_NOPOOL"]
ops = lambda f: f.reports[0].zenith_ops
print("A ops", ops(a)); print("B ops", ops(b))
with torch.no_grad():
    ref = m(x)
print("max err A", (ya - ref).abs().max().item(), "B", (yb - ref).abs().max().item())
res = {}
with torch.no_grad():
    for _ in range(3): a(x); b(x)
    for r in range(rounds):
        for mode in random.sample(["settled", "b2b"], 2):
            for k, f in random.sample([("A", a), ("B", b)], 2):
                if mode == "settled": stats.settle()
                else: f(x)
                t = time.perf_counter(); f(x); res.setdefault((mode, k), []).append(time.perf_counter() - t)
rng = random.Random(0)
for mode in ("settled", "b2b"):
    ra, rb = res[(mode, "A")], res[(mode, "B")]
    rat = [p / q for p, q in zip(ra, rb)]
    boots = sorted(statistics.median(rng.choices(rat, k=len(rat))) for _ in range(2000))
    print(f"{name} b{B} {mode}: A {statistics.median(ra)*1e3:.3f} ms B {statistics.median(rb)*1e3:.3f} ms "
          f"A/B {statistics.median(rat):.3f} [{boots[50]:.3f}, {boots[1949]:.3f}]")
