# A/B of a run-time switch (env var read per parallel_for) on a frozen torchvision model, each call after
# stats.settle (pool asleep, as the bench times) and back to back; per-round ratios on/off with bootstrap CI.
import os, sys, time, random, statistics, torch, torchvision, zenith
from zenith.bench import stats
torch.manual_seed(0); torch.set_num_threads(2)
var, name, B, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
f = zenith.freeze(m)
def sw(on):
    if on: os.environ[var] = "1"
    else: os.environ.pop(var, None)
res = {}
with torch.no_grad():
    ref = m(x)
    for on in (True, False):
        sw(on); print("on" if on else "off", "max abs err vs eager", (f(x) - ref).abs().max().item())
    for r in range(rounds):
        for mode in random.sample(["settled", "b2b"], 2):
            for on in random.sample([True, False], 2):
                sw(on)
                if mode == "settled": stats.settle()
                else: f(x)
                t = time.perf_counter(); f(x); res.setdefault((mode, on), []).append(time.perf_counter() - t)
rng = random.Random(0)
for mode in ("settled", "b2b"):
    a, b = res[(mode, True)], res[(mode, False)]
    rat = [p / q for p, q in zip(a, b)]
    boots = sorted(statistics.median(rng.choices(rat, k=len(rat))) for _ in range(2000))
    print(f"{name} b{B} {mode}: on {statistics.median(a)*1e3:.3f} ms off {statistics.median(b)*1e3:.3f} ms "
          f"on/off {statistics.median(rat):.3f} [{boots[50]:.3f}, {boots[1949]:.3f}]")
