# Per-node times at 1 and 2 threads (zenith.profile, median of 9 calls each), sorted by the
# time lost against a perfect split: python thread_speedup.py <batch> <torchvision model>
import os, sys, torch, torchvision, zenith, collections
B = int(sys.argv[1]); name = sys.argv[2]
res = {}
for th in (1, 2):
    torch.set_num_threads(th); torch._dynamo.reset()
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
    c = torch.compile(m, backend="zenith")
    with torch.no_grad():
        for _ in range(3): c(x)
        with zenith.profile(trace=os.devnull) as p:
            for _ in range(9): c(x)
    per = collections.defaultdict(list); info = {}
    for op, node, graph, tid, ts, dur, shape in p.events:
        per[node].append(dur); info[node] = (op, str(shape))
    res[th] = {n: sorted(d)[len(d)//2] / 1e3 for n, d in per.items()}
t1 = sum(res[1].values()); t2 = sum(res[2].values())
print(f"total 1 thread {t1:.3f} ms, 2 threads {t2:.3f} ms, speedup {t1/t2:.2f}")
rows = sorted(res[2], key=lambda n: -(res[2][n] - res[1][n] / 2))
for n in rows[:25]:
    print(f"{info[n][0]:<14} {info[n][1]:<28} 1t {res[1][n]:.3f} 2t {res[2][n]:.3f} speedup {res[1][n]/res[2][n]:.2f} lost {res[2][n]-res[1][n]/2:.3f}")
