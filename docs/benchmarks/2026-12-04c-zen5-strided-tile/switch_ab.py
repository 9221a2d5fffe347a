# One frozen model, a run-time switch (env var read by the kernel per call) toggled between calls:
# A = switch set, B = unset; rounds alternate AB / BA; per-round A/B ratio, median, 95% bootstrap.
# python switch_ab.py VAR model batch rounds
import os, sys, time, random, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
var, name, B = sys.argv[1], sys.argv[2], int(sys.argv[3]); rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 40
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
f = zenith.freeze(m)
def run(on):
    if on: os.environ[var] = "1"
    else: os.environ.pop(var, None)
    s = time.perf_counter(); y = f(x); return time.perf_counter() - s, y
with torch.no_grad():
    ref = m(x)
    for on in (True, False):
        _, y = run(on); print("A" if on else "B", "max abs err vs eager", (y - ref).abs().max().item())
    for _ in range(3): run(True); run(False)
    ra, rb, rat = [], [], []
    for r in range(rounds):
        if r % 2: b = run(False)[0]; a = run(True)[0]
        else: a = run(True)[0]; b = run(False)[0]
        ra.append(a); rb.append(b); rat.append(a / b)
rng = random.Random(0)
boots = sorted(statistics.median(rng.choices(rat, k=len(rat))) for _ in range(2000))
print(f"{name} batch {B} {var}: A {statistics.median(ra)*1e3:.2f} ms  B {statistics.median(rb)*1e3:.2f} ms  "
      f"A/B {statistics.median(rat):.3f} [{boots[50]:.3f}, {boots[1949]:.3f}]")
