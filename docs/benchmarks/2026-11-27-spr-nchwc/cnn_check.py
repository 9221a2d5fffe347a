import sys, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); name = sys.argv[2] if len(sys.argv) > 2 else "resnet50"
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    ref = m(x); out = c(x)
    err = ((out - ref).abs().max() / ref.abs().max()).item()
    for _ in range(3): c(x)
    ts=[]
    for _ in range(20):
        t=time.perf_counter(); c(x); ts.append(time.perf_counter()-t)
ts.sort(); print(f"median ms {ts[10]*1e3:.2f} relerr {err:.2e}")
