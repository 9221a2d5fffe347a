# In-process A/B of a prepare-time choice: one frozen copy of a torchvision model per value of
# the environment variable argv[1] (set during that copy's first call, when its kernels are
# chosen), then calls alternated in shuffled rounds, each round a copy's median of 3 calls.
# python prep_ab.py ENV model batch v1,v2,... [rounds]; ratios are time / the first value's.
import os, random, statistics, sys, time, copy, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
env, name, b, vals = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 30
m = getattr(torchvision.models, name.replace("-", "_"))().eval()
x = torch.randn(b, 3, 224, 224)
fs = {}
with torch.no_grad():
    ref = m(x)
    for v in vals:
        os.environ[env] = v
        fs[v] = zenith.freeze(copy.deepcopy(m))
        out = fs[v](x)
        print(f"{env}={v}: max abs diff vs eager {(out - ref).abs().max().item():.3g}")
    os.environ.pop(env)
    res = {v: [] for v in vals}
    for r in range(rounds):
        for v in random.sample(vals, len(vals)):
            ts = []
            for _ in range(3):
                t = time.perf_counter(); fs[v](x); ts.append(time.perf_counter() - t)
            res[v].append(statistics.median(ts))
base = res[vals[0]]
print(f"{name} b{b} {env}={vals[0]}: {statistics.median(base)*1e3:.2f} ms")
for v in vals[1:]:
    rat = sorted(a / c for a, c in zip(res[v], base)); n = len(rat)
    print(f"  {env}={v}: {statistics.median(res[v])*1e3:.2f} ms, ratio {rat[n//2]:.3f} [{rat[n//4]:.3f}, {rat[3*n//4]:.3f}]")
