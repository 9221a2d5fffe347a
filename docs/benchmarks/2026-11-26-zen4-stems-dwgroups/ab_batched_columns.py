# Batched small-map convs + bn + ReLU: panels built from the images against im2col (ZB=1 of
# ab_switches.diff), in-process, interleaved; per-round ratio medians. 1x1 stride-1 convs
# take im2col either way (a noise check).
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_batched_columns.py 20
import os, sys, time, torch, zenith, statistics as st
torch.set_num_threads(2)
cases=[(8,256,28,256,3,2,1),(8,512,14,512,3,2,1),(8,512,28,1024,1,2,1),(8,1024,14,256,1,1,1),(8,2048,7,512,1,1,1),(8,512,7,512,3,1,1),(2,96,17,80,3,1,2),(3,64,20,40,5,2,1),(8,64,20,64,3,1,3)]
R=int(sys.argv[1]) if len(sys.argv)>1 else 15
for N,C,H,OC,k,s,dil in cases:
    torch._dynamo.reset()
    m=torch.nn.Sequential(torch.nn.Conv2d(C,OC,k,s,dil*(k//2),dilation=dil,bias=False),torch.nn.BatchNorm2d(OC),torch.nn.ReLU()).eval()
    x=torch.randn(N,C,H,H)
    with torch.no_grad():
        z=zenith.compile(m); ref=m(x)
        res=[[],[]]; errs=[0,0]
        for r in range(R):
            for i in (0,1):
                if i: os.environ["ZB"]="1"
                else: os.environ.pop("ZB",None)
                t=time.perf_counter(); y=z(x); res[i].append(time.perf_counter()-t)
                errs[i]=(y-ref).abs().max().item()
    med=[st.median(r[2:])*1e3 for r in res]
    rat=st.median([p/q for p,q in zip(res[0][2:],res[1][2:])])
    print(f"N{N} C{C} H{H} OC{OC} k{k} s{s} d{dil}: new {med[0]:7.2f} old {med[1]:7.2f} new/old {rat:.3f}  err {errs[0]:.1e} {errs[1]:.1e}",flush=True)
