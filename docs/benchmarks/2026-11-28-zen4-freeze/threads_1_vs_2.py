# One thread against two in one process, alternating (a frozen MobileNet V2 at batch 1):
# python threads_1_vs_2.py; with OMP_WAIT_POLICY=passive the same
import sys, time, os, torch, torchvision, zenith, statistics
torch.manual_seed(0)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1,3,224,224)
f = zenith.freeze(m)
res = {1: [], 2: []}
with torch.no_grad():
    for th in (2, 1): 
        torch.set_num_threads(th)
        for _ in range(5): f(x)
    for r in range(40):
        for th in (1, 2):
            torch.set_num_threads(th)
            f(x)
            t=time.perf_counter(); f(x); f(x); res[th].append((time.perf_counter()-t)/2)
print(os.environ.get("OMP_WAIT_POLICY","default"), " ".join("%dT %.2f ms" % (k, statistics.median(v)*1e3) for k, v in res.items()))
