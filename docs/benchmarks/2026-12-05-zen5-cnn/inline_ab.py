# torch.compile(backend="zenith") with Dynamo's inline_inbuilt_nn_modules as set (True, the
# default since torch 2.5) against the same compile traced with it False (the flag patched
# for the first call only, when Dynamo traces), and zenith.freeze; calls interleaved in
# shuffled rounds, each after the threads went quiet (the bench's settle), as `zenith bench`
# times them. python inline_ab.py model batch [rounds]
import copy, random, statistics, sys, time, torch, torchvision, zenith
from zenith.bench import stats
torch.manual_seed(0); torch.set_num_threads(2)
name, b = sys.argv[1], int(sys.argv[2]); rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 60
m = getattr(torchvision.models, name.replace("-", "_"))().eval(); x = torch.randn(b, 3, 224, 224)
inl = zenith.compile(copy.deepcopy(m)); noinl = zenith.compile(copy.deepcopy(m)); fr = zenith.freeze(copy.deepcopy(m))
with torch.no_grad():
    ref = m(x)
    inl(x)
    with torch._dynamo.config.patch(inline_inbuilt_nn_modules=False):
        noinl(x)
    fr(x)
    fns = {"inline": inl, "no-inline": noinl, "freeze": fr}
    for k, f in fns.items(): print(k, "max abs diff", (f(x) - ref).abs().max().item())
    n0 = zenith.stats()["graphs_compiled"] if "graphs_compiled" in zenith.stats() else None
    res = {k: [] for k in fns}
    for r in range(rounds):
        for k in random.sample(list(fns), len(fns)):
            stats.settle(); t = time.perf_counter(); fns[k](x); res[k].append(time.perf_counter() - t)
    print("stats after", zenith.stats())
base = res["inline"]
for k, v in res.items():
    rat = sorted(a / c for a, c in zip(v, base)); n = len(rat)
    print(f"{k}: median {statistics.median(v)*1e3:.3f} ms, / inline {rat[n//2]:.3f} [{rat[n//4]:.3f}, {rat[3*n//4]:.3f}]")
