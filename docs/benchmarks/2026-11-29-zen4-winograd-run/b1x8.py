import sys, time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
name=sys.argv[1]; rounds=int(sys.argv[2])
m=getattr(torchvision.models, name)().eval(); x=torch.randn(8,3,224,224)
c8=torch.compile(m, backend="zenith"); c1=torch.compile(m, backend="zenith", dynamic=False)
xs=[x[i:i+1].contiguous() for i in range(8)]
with torch.no_grad():
    for _ in range(3): c8(x); [c1(xi) for xi in xs]
    a=[];b=[]
    for r in range(rounds):
        t=time.perf_counter(); c8(x); a.append(time.perf_counter()-t)
        t=time.perf_counter(); [c1(xi) for xi in xs]; b.append(time.perf_counter()-t)
    ra=[q/p for p,q in zip(a,b)]
    print(f"{name} b8 {statistics.median(a)*1e3:.2f} ms   8 x b1 {statistics.median(b)*1e3:.2f} ms   ratio(8xb1/b8) {statistics.median(ra):.3f} p25 {sorted(ra)[len(ra)//4]:.3f} p75 {sorted(ra)[3*len(ra)//4]:.3f}")
