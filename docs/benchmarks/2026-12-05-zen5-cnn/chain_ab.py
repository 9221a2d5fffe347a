# In-process A/B of a run-time switch (environment variable argv[1], read by the C++ per
# call) on conv_chain.py's chain: n distinct 3x3 convs C -> C on an H x W map, batch b,
# frozen; calls alternate between the values in shuffled rounds (median of 3 calls each).
# python chain_ab.py ENV C H b n v1,v2,... [rounds]; ratios are time / the first value's.
import os, random, statistics, sys, time, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
env = sys.argv[1]; C, H, b, n = (int(a) for a in sys.argv[2:6]); vals = sys.argv[6].split(",")
rounds = int(sys.argv[7]) if len(sys.argv) > 7 else 30
layers = []
for _ in range(n): layers += [torch.nn.Conv2d(C, C, 3, padding=1), torch.nn.ReLU()]
m = torch.nn.Sequential(*layers).eval(); x = torch.randn(b, C, H, H)
f = zenith.freeze(m)
res = {v: [] for v in vals}
with torch.no_grad():
    ref = m(x)
    for v in vals:
        os.environ[env] = v; print(f"{env}={v}: max abs diff {(f(x) - ref).abs().max().item():.3g}")
    for r in range(rounds):
        for v in random.sample(vals, len(vals)):
            os.environ[env] = v; ts = []
            for _ in range(3):
                t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
            res[v].append(statistics.median(ts) / n)
base = res[vals[0]]
print(f"{C} ch {H}x{H} b{b}: {env}={vals[0]} {statistics.median(base)*1e6:.1f} us a conv")
for v in vals[1:]:
    rat = sorted(a / c for a, c in zip(res[v], base)); k = len(rat)
    print(f"  {env}={v}: {statistics.median(res[v])*1e6:.1f} us, ratio {rat[k//2]:.3f} [{rat[k//4]:.3f}, {rat[3*k//4]:.3f}]")
