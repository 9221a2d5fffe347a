# Depthwise 3x3 + bn + ReLU6 alone: channel groups against one plane at a time (ZC=1 of
# ab_switches.diff), in-process, interleaved; per-round ratio medians.
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_depthwise.py 30
import os, sys, time, torch, zenith, statistics as st
torch.set_num_threads(2)
cases=[(1,384,14,1),(1,576,14,1),(1,576,14,2),(1,960,7,1),(8,960,7,1),(8,384,14,1),(1,192,28,1),(1,144,56,2),(1,96,112,2),(2,37,9,1),(8,144,28,1)]
R=int(sys.argv[1]) if len(sys.argv)>1 else 15
for N,C,H,s in cases:
    torch._dynamo.reset()
    m=torch.nn.Sequential(torch.nn.Conv2d(C,C,3,s,1,groups=C,bias=False),torch.nn.BatchNorm2d(C),torch.nn.ReLU6()).eval()
    for p in m.parameters(): p.data.normal_()
    m[1].running_var.uniform_(0.5,2); m[1].running_mean.normal_()
    x=torch.randn(N,C,H,H)
    with torch.no_grad():
        z=zenith.compile(m); ref=m(x)
        res=[[],[]]; errs=[0,0]
        for r in range(R):
            for i in (0,1):
                if not i: os.environ["ZC"]="1"
                else: os.environ.pop("ZC",None)
                t=time.perf_counter(); y=z(x); res[i].append(time.perf_counter()-t)
                errs[i]=(y-ref).abs().max().item()
    med=[st.median(r[2:])*1e3 for r in res]
    rat=st.median([q/p for p,q in zip(res[0][2:],res[1][2:])])
    print(f"N{N} C{C} H{H} s{s}: plane {med[0]:7.3f} channels {med[1]:7.3f} ms  channels/plane {rat:.3f}  err {errs[0]:.1e} {errs[1]:.1e}",flush=True)
