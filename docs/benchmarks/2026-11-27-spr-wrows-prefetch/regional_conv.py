import torch, time, zenith, sys
import torch.nn as nn
torch.set_num_threads(2); torch.manual_seed(0)
class Blk(nn.Module):
    def __init__(s, c):
        super().__init__(); s.c=nn.Conv2d(c,c,3,1,1,bias=False); s.bn=nn.BatchNorm2d(c)
    def forward(s, x): return torch.relu(s.bn(s.c(x))) + x
mode=sys.argv[1]
m=nn.Sequential(*[Blk(128) for _ in range(8)]).eval(); x=torch.randn(1,128,28,28)
if mode=="whole": m=torch.compile(m, backend="zenith")
else:
    for b in m: b.compile(backend="zenith")
with torch.no_grad():
    ref=m(x)
    for _ in range(3): m(x)
    ts=[]
    for _ in range(20):
        t=time.perf_counter(); m(x); ts.append(time.perf_counter()-t)
ts.sort(); print(mode, "8 conv blocks: %.2f ms" % (ts[10]*1e3))
