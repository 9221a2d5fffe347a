import sys, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(8, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    m(x)
    for _ in range(3): c(x)
    for r in range(6):
        ts=[]
        for _ in range(15):
            t=time.perf_counter(); c(x); ts.append(time.perf_counter()-t)
        ts.sort(); print(f"median ms {ts[7]*1e3:.2f}", flush=True)
import os
for t in os.listdir("/proc/self/task"):
    s = open(f"/proc/self/task/{t}/stat").read().split(") ")[1].split()
    ut = int(s[11]) + int(s[12])
    if ut > 20: print(t, "cpu_ticks", ut, "last_cpu", s[36], os.sched_getaffinity(int(t)))
