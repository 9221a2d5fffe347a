# Per-op-and-shape times of ResNet-50 int8-static on Zenith (median of 5 profiled calls): python q_profile.py <batch>
import os, sys, copy, torch, torchvision, zenith, collections
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
c = torch.compile(q, backend="zenith")
with torch.no_grad():
    for _ in range(3): c(x)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(5): c(x)
per = collections.defaultdict(list); info = {}
for op, node, graph, tid, ts, dur, shape in p.events:
    per[node].append(dur); info[node] = (op, str(shape))
rows = collections.defaultdict(lambda: [0.0, 0]); tot = 0.0
for n, d in per.items():
    med = sorted(d)[len(d) // 2] / 1e3; rows[info[n]][0] += med; rows[info[n]][1] += 1; tot += med
byop = collections.defaultdict(float)
for (op, sh), (ms, k) in rows.items(): byop[op] += ms
for op, ms in sorted(byop.items(), key=lambda kv: -kv[1]): print(f"{op:<22} {ms:8.3f} ms {100*ms/tot:5.1f}%")
for (op, sh), (ms, k) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:25]: print(f"{op:<22} n={k:<3} {ms:7.3f} ms  {sh}")
print(f"total node ms {tot:.3f}")
