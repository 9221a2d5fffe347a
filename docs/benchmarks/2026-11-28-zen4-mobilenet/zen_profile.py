# Per-node times of a torchvision model on Zenith (median of 7 profiled calls),
# grouped by op and shape: python zen_profile.py <batch> [model]
import os  # per-call events are kept only with a trace; it goes to os.devnull
import sys, torch, torchvision, zenith, collections
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); name = sys.argv[2] if len(sys.argv) > 2 else "mobilenet_v2"
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(3): c(x)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(7): c(x)
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
import time
with torch.no_grad():
    ts = []
    for _ in range(30):
        t = time.perf_counter(); c(x); ts.append(time.perf_counter() - t)
ts.sort(); print(f"whole call median {ts[15]*1e3:.3f} ms")
