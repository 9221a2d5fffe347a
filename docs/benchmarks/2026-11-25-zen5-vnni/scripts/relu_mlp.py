# The issue 15 per-call case: a 256-wide two-layer MLP (ReLU) on one row, interleaved
# eager / compiled calls under inference_mode; medians and a bootstrap 95% CI of the ratio.
import random, statistics, sys, time, torch, zenith
torch.manual_seed(0)
torch.set_num_threads(2)
m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256)).eval()
x = torch.randn(1, 256)
c = torch.compile(m, backend=sys.argv[2] if len(sys.argv) > 2 else "zenith")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
with torch.inference_mode():
    assert torch.allclose(c(x), m(x), rtol=1e-5, atol=1e-5)
    for _ in range(200): c(x); m(x)
    te, tz = [], []
    for i in range(n):
        for f, ts in ((m, te), (c, tz)) if i % 2 else ((c, tz), (m, te)):
            t0 = time.perf_counter(); f(x); ts.append(time.perf_counter() - t0)
me, mz = statistics.median(te), statistics.median(tz)
rs = []
rng = random.Random(0)
for _ in range(1000):
    idx = [rng.randrange(n) for _ in range(n)]
    rs.append(statistics.median([tz[i] for i in idx]) / statistics.median([te[i] for i in idx]))
rs.sort()
print(f"eager {me*1e6:.1f} us, zenith {mz*1e6:.1f} us, ratio {mz/me:.3f} [{rs[25]:.3f}, {rs[974]:.3f}] over {n} interleaved calls")
