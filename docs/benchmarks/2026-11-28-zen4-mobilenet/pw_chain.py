import os  # per-call events are kept only with a trace; it goes to os.devnull
import sys, time, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); H = int(sys.argv[2]); C = int(sys.argv[3]); E = int(sys.argv[4])
layers = []
for i in range(4):
    layers += [torch.nn.Conv2d(C, E, 1, bias=False), torch.nn.BatchNorm2d(E), torch.nn.ReLU6(),
               torch.nn.Conv2d(E, C, 1, bias=False), torch.nn.BatchNorm2d(C)]
m = torch.nn.Sequential(*layers).eval()
x = torch.randn(B, C, H, H)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(3): c(x)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(15): c(x)
import collections
per = collections.defaultdict(list)
for op, node, graph, tid, ts, dur, shape in p.events: per[(op, str(shape))].append(dur)
for k, d in per.items():
    d.sort(); n = len(d) // 15
    ms = d[len(d)//2] / 1e3
    sh = eval(k[1]); 
    print(f"{k[0]:<14} {k[1]:<22} x{n} median {ms*1e3:7.1f} us")
