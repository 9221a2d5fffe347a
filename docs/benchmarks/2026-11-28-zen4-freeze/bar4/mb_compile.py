import sys, time, torch, torchvision, zenith, statistics
torch.set_num_threads(2); torch.manual_seed(0)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1,3,224,224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(5): c(x)
    ts=[]
    for _ in range(150):
        t=time.perf_counter(); c(x); ts.append(time.perf_counter()-t)
print(sys.argv[1], "median %.2f ms" % (statistics.median(ts)*1e3), zenith.__file__[:20])
