# CPU time per CPU and per thread over 300 calls of a frozen MobileNet V2 (batch 1), from /proc:
# python proc_stat_loop.py
import sys, time, os, torch, torchvision, zenith, statistics
torch.set_num_threads(2); torch.manual_seed(0)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1,3,224,224)
f = zenith.freeze(m)
def cpus():
    with open("/proc/stat") as fh:
        return [list(map(int, l.split()[1:])) for l in fh if l.startswith("cpu") and l[3] != " "]
def tasks():
    out = {}
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{t}/stat") as fh:
            p = fh.read().rsplit(")", 1)[1].split()
        out[t] = (int(p[11]), int(p[12]), int(p[36]))  # utime, stime, last cpu
    return out
with torch.no_grad():
    for _ in range(5): f(x)
    c0 = cpus(); t0 = tasks()
    ts=[]
    for _ in range(300):
        t=time.perf_counter(); f(x); ts.append(time.perf_counter()-t)
    c1 = cpus(); t1 = tasks()
print("median %.2f ms" % (statistics.median(ts)*1e3))
for i,(a,b) in enumerate(zip(c0,c1)):
    d=[y-x for x,y in zip(a,b)]; print(f" cpu{i} user {d[0]} sys {d[2]} idle {d[3]} steal {d[7]}")
for k in t1:
    if k in t0:
        u = t1[k][0]-t0[k][0]; s = t1[k][1]-t0[k][1]
        if u+s: print(f" task {k} utime {u} stime {s} last cpu {t1[k][2]}")
