import sys, time, torch, torchvision, zenith, statistics, os
torch.set_num_threads(2); torch.manual_seed(0)
B = int(sys.argv[1])
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(B,3,224,224)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): f(x)
    ts=[]
    for _ in range(100 if B == 1 else 20):
        t=time.perf_counter(); f(x); ts.append(time.perf_counter()-t)
print("L" + os.environ.get("ZENITH_XBLOCK", "16"), "b%d median %.2f ms" % (B, statistics.median(ts)*1e3))
