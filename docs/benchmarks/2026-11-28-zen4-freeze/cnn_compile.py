import sys, time, torch, torchvision, zenith, statistics
torch.set_num_threads(2); torch.manual_seed(0)
name, B = sys.argv[2], int(sys.argv[3])
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B,3,224,224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(3): c(x)
    ts=[]
    for _ in range(40 if B == 1 else 8):
        t=time.perf_counter(); c(x); ts.append(time.perf_counter()-t)
print(sys.argv[1], name, "b%d" % B, "median %.2f ms" % (statistics.median(ts)*1e3))
