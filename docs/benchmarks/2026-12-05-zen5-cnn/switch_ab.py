# In-process A/B of a run-time switch (environment variable argv[1], read by the C++ per
# call) on one frozen torchvision model: calls alternate between the values in shuffled
# rounds (median of 3 calls each). python switch_ab.py ENV model batch v1,v2,... [rounds]
import os, random, statistics, sys, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
env, name, b, vals = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 30
m = getattr(torchvision.models, name.replace("-", "_"))().eval(); x = torch.randn(b, 3, 224, 224)
f = zenith.freeze(m)
res = {v: [] for v in vals}
with torch.no_grad():
    ref = m(x)
    for v in vals:
        os.environ[env] = v; print(f"{env}={v}: max abs diff vs eager {(f(x) - ref).abs().max().item():.3g}")
    for r in range(rounds):
        for v in random.sample(vals, len(vals)):
            os.environ[env] = v; ts = []
            for _ in range(3):
                t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
            res[v].append(statistics.median(ts))
base = res[vals[0]]
print(f"{name} b{b} {env}={vals[0]}: {statistics.median(base)*1e3:.2f} ms")
for v in vals[1:]:
    rat = sorted(a / c for a, c in zip(res[v], base)); k = len(rat)
    print(f"  {env}={v}: {statistics.median(res[v])*1e3:.2f} ms, ratio {rat[k//2]:.3f} [{rat[k//4]:.3f}, {rat[3*k//4]:.3f}]")
