import torch, torchvision, zenith, statistics, time, random
from zenith.bench import stats
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(10): f(x)
    modes = {"b2b": [], "settled": []}
    with zenith.profiler.profile(trace="/tmp/exp/sn.json") as p:
        seq = []
        for r in range(150):
            for mode in random.sample(list(modes), 2):
                if mode == "settled": stats.settle()
                else: f(x)
                seq.append(mode)
                t = time.perf_counter(); f(x); modes[mode].append(time.perf_counter() - t)
ev = sorted(p.events, key=lambda e: e[4])
calls = []; cur = []
for e in ev:
    if e[1] == 0 and cur: calls.append(cur); cur = []
    cur.append(e)
calls.append(cur)
# b2b mode has 2 calls per entry (warm + timed); settled 1. Rebuild labels per call.
labels = []
for mode in seq:
    if mode == "b2b": labels += ["warm", "b2b"]
    else: labels += ["settled"]
assert len(labels) == len(calls), (len(labels), len(calls))
per = {}
for lab, c in zip(labels, calls):
    if lab == "warm": continue
    for e in c: per.setdefault((lab, e[1]), []).append(e[5])
    per.setdefault((lab, "start->end"), []).append(c[-1][4] + c[-1][5] - c[0][4])
nodes = sorted({k[1] for k in per if k[1] != "start->end"})
cum = 0
for n in nodes:
    a = statistics.median(per[("b2b", n)]); b = statistics.median(per[("settled", n)]); cum += b - a
    print(f"node {n:3d} b2b {a:7.1f} settled {b:7.1f} diff {b - a:6.1f} cum {cum:6.1f}")
print("span", statistics.median(per[("b2b", "start->end")]), statistics.median(per[("settled", "start->end")]))
print({k: round(statistics.median(v) * 1e3, 3) for k, v in modes.items()})
