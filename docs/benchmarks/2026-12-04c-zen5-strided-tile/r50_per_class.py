# Per-node times of ResNet-50 frozen by zenith.freeze, summed by conv class, with each class GFLOP/s
# (r50flops.table: the frozen graph order c1, c2, c3, downsample): python r50_per_class.py <batch> [-v]
# (CALLS=n profiled calls, default 15).
import os, sys, collections, torch, torchvision, zenith
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from r50flops import table
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]) if len(sys.argv) > 1 else 1
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): f(x)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(int(os.environ.get("CALLS", 15))): f(x)
per = collections.defaultdict(list); info = {}
for op, node, graph, tid, ts, dur, shape in p.events:
    per[node].append(dur); info[node] = (op, shape)
convs = [n for n in per if info[n][0].startswith("conv2d")]
tab = table(B); assert len(tab) == len(convs), (len(tab), len(convs))
cls = collections.defaultdict(lambda: [0.0, 0.0])
tot = 0
for (name, fl), n in zip(tab, convs):
    med = sorted(per[n])[len(per[n])//2]/1e3; tot += med
    k = name.split()[1] + (" s2" if " s2 " in name else "") + " @" + name.split("@")[1]
    cls[k][0] += med; cls[k][1] += fl
    if "-v" in sys.argv: print(f"{name:<32} {med:7.3f} ms {fl/med/1e6:7.1f} GFLOP/s")
for n in per:
    if not info[n][0].startswith("conv2d"):
        med = sorted(per[n])[len(per[n])//2]/1e3; tot += med; cls[info[n][0]][0] += med
for k, (ms, fl) in sorted(cls.items(), key=lambda kv: -kv[1][0]):
    print(f"{k:<20} {ms:8.3f} ms {100*ms/tot:5.1f}%  " + (f"{fl/ms/1e6:6.0f} GFLOP/s" if fl else ""))
print("total node ms", round(tot, 3))
