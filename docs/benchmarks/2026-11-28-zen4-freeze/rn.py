import sys, time, torch, torchvision, zenith, statistics, os
torch.set_num_threads(2); torch.manual_seed(0)
m = torchvision.models.resnet50().eval(); x = torch.randn(1,3,224,224)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): f(x)
    ts=[]
    for _ in range(25):
        t=time.perf_counter(); f(x); ts.append(time.perf_counter()-t)
print(os.environ.get("ZENITH_NO_WINOGRAD", "-"), "median %.2f ms" % (statistics.median(ts)*1e3))
