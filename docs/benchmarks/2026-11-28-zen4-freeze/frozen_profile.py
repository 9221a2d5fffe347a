# Per-node times of a torchvision model frozen by zenith.freeze (median of 7 profiled
# calls), grouped by op and shape, and the whole call beside the kernels' sum:
# python frozen_profile.py <batch> [model] [-v]
import os  # per-call events are kept only with a trace; it goes to os.devnull
import sys, time, collections, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); name = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else "mobilenet_v2"
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): f(x)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(7): f(x)
per = collections.defaultdict(list); info = {}
for op, node, graph, tid, ts, dur, shape in p.events:
    per[node].append(dur); info[node] = (op, str(shape))
rows = collections.defaultdict(lambda: [0.0, 0])
tot = 0.0
for n, d in per.items():
    med = sorted(d)[len(d) // 2] / 1e3
    rows[info[n]][0] += med; rows[info[n]][1] += 1; tot += med
for (op, shape), (ms, k) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
    print(f"{op:<16} n={k:<3} {ms:8.3f} ms {100*ms/tot:5.1f}%  {shape}")
print(f"total node ms {tot:.3f}")
if "-v" in sys.argv:
    for n, d in per.items():
        print(f"  {info[n][0]:<16} {sorted(d)[len(d)//2]/1e3:7.3f} ms {info[n][1]}")
with torch.no_grad():
    ts = []
    for _ in range(200):
        t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
ts.sort(); print(f"whole call median {ts[100]*1e3:.3f} ms  p10 {ts[20]*1e3:.3f}")
