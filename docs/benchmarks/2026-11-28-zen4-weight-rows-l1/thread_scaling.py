import os, sys, torch, torchvision, zenith, collections
torch.manual_seed(0)
B = int(sys.argv[1]); name = sys.argv[2] if len(sys.argv) > 2 else "mobilenet_v2"
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
c = zenith.freeze(m)
res = {}
for th in (1, 2):
    torch.set_num_threads(th)
    with torch.no_grad():
        for _ in range(3): c(x)
        with zenith.profile(trace=os.devnull) as p:
            for _ in range(9): c(x)
    per = collections.defaultdict(list); info = {}
    for op, node, graph, tid, ts, dur, shape in p.events:
        per[node].append(dur); info[node] = (op, str(shape))
    res[th] = {n: sorted(d)[len(d)//2] for n, d in per.items()}
t1 = sum(res[1].values()); t2 = sum(res[2].values())
print(f"total 1 thread {t1/1e3:.2f} ms, 2 threads {t2/1e3:.2f} ms, speedup {t1/t2:.2f}")
rows = sorted(res[2], key=lambda n: -(res[2][n] - res[1][n] / 2))
for n in rows[:14]:
    print(f"{info[n][0]:<14} {info[n][1]:<22} 1t {res[1][n]:8.1f} us 2t {res[2][n]:8.1f} us  speedup {res[1][n]/res[2][n]:.2f}  lost {res[2][n]-res[1][n]/2:7.1f} us")
