import random, torch, torchvision, zenith, statistics, time, sys
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "mobilenet_v2"
m = getattr(torchvision.models, name)().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad(): f(x)
fr = next(iter(f._graphs.values()))
bound = fr.bound
fns = dict(frozen=lambda: f(x), inner=lambda: fr([x]), call=lambda: fr._call([*bound, x]))
res = {k: [] for k in fns}
with torch.no_grad():
    for r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 800):
        order = list(fns.items()); random.shuffle(order)
        for k, fn in order:
            t = time.perf_counter(); fn(); res[k].append(time.perf_counter() - t)
for k in res:
    d = [a - b for a, b in zip(res[k], res["call"])]
    print(k, round(statistics.median(res[k]) * 1e3, 4), "vs call us", round(statistics.median(d) * 1e6, 1))
