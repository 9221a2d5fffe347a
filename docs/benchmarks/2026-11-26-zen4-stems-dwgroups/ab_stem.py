# Few-input-channel convs + bn + ReLU (the stems): conv2d_direct against the GEMM per image
# (ZD=1 of ab_switches.diff), in-process, interleaved; per-round ratio medians.
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_stem.py 20
import os, sys, time, torch, zenith, statistics as st
torch.set_num_threads(2)
cases=[(1,3,224,64,7,2),(8,3,224,64,7,2),(1,3,224,32,3,2),(8,3,224,32,3,2),(2,3,31,10,5,3),(1,1,28,20,3,1),(3,4,17,9,3,1)]
R=int(sys.argv[1]) if len(sys.argv)>1 else 15
for N,C,H,OC,k,s in cases:
    torch._dynamo.reset()
    m=torch.nn.Sequential(torch.nn.Conv2d(C,OC,k,s,k//2,bias=False),torch.nn.BatchNorm2d(OC),torch.nn.ReLU()).eval()
    m[1].running_var.uniform_(0.5,2); m[1].running_mean.normal_(); m[1].weight.data.normal_(); m[1].bias.data.normal_()
    x=torch.randn(N,C,H,H)
    with torch.no_grad():
        z=zenith.compile(m); ref=m(x)
        res=[[],[]]; errs=[0,0]
        for r in range(R):
            for i in (0,1):
                if i: os.environ["ZD"]="1"
                else: os.environ.pop("ZD",None)
                t=time.perf_counter(); y=z(x); res[i].append(time.perf_counter()-t)
                errs[i]=(y-ref).abs().max().item()
    med=[st.median(r[2:])*1e3 for r in res]
    rat=st.median([p/q for p,q in zip(res[0][2:],res[1][2:])])
    print(f"N{N} C{C} H{H} OC{OC} k{k} s{s}: direct {med[0]:7.3f} gemm {med[1]:7.3f} ms direct/gemm {rat:.3f}  err {errs[0]:.1e} {errs[1]:.1e}",flush=True)
