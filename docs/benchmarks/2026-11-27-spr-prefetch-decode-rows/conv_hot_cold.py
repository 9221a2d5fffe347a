import sys, time, torch, zenith
torch.set_num_threads(2)
junk = torch.empty(64*1024*1024//4*4)  # 256 MB
def bench(f, n=30, flush=False):
    for _ in range(3): f()
    ts=[]
    for _ in range(n):
        if flush: junk.add_(1.0)
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    ts.sort(); return ts[n//2]
shapes = [(256,1024,1,1,14),(1024,256,1,1,14),(512,2048,1,1,7),(2048,512,1,1,7),(256,256,3,1,14),(512,512,3,1,7),(128,128,3,1,28)]
for ic, oc, k, s, hw in shapes:
    conv = torch.nn.Sequential(torch.nn.Conv2d(ic, oc, k, s, k//2, bias=False), torch.nn.BatchNorm2d(oc), torch.nn.ReLU()).eval()
    x = torch.randn(1, ic, hw, hw)
    torch._dynamo.reset()
    c = torch.compile(conv, backend="zenith")
    with torch.no_grad():
        c(x)
        th = bench(lambda: c(x)); tc = bench(lambda: c(x), flush=True)
    fl = 2*oc*ic*k*k*hw*hw
    print(f"{ic}->{oc} k{k} {hw}x{hw}: hot {th*1e3:.3f} ms {fl/th/1e9:.0f} GF/s | cold {tc*1e3:.3f} {fl/tc/1e9:.0f}  W {oc*ic*k*k*4/1e6:.1f} MB")
