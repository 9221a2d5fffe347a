import sys, time, torch, torchvision, zenith, collections
torch.manual_seed(0)
B = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(2)
m = torchvision.models.resnet50().eval()
x = torch.randn(B, 3, 224, 224)
convs = []
def hook(mod, inp, out):
    convs.append((tuple(inp[0].shape), tuple(out.shape), mod.kernel_size, mod.stride, mod.groups))
hs = [mm.register_forward_hook(hook) for mm in m.modules() if isinstance(mm, torch.nn.Conv2d)]
with torch.no_grad(): m(x)
for h in hs: h.remove()
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(3): c(x)
    ts=[]
    for _ in range(10):
        t=time.perf_counter(); c(x); ts.append(time.perf_counter()-t)
    ts.sort(); print("median ms", ts[5]*1e3)
    agg = collections.defaultdict(lambda: [0.0, 0])
    with zenith.profile(trace="/tmp/exp/rn.json") as p:
        for _ in range(5): c(x)
print(p)
ev = [e for e in p.events]
# per-node median duration (sum over threads? events per kernel call on calling thread)
per = collections.defaultdict(list)
order = []
for op, node, graph, tid, ts, dur, shape in ev:
    if node not in per: order.append((op,node,shape))
    per[node].append(dur)
ci = 0
rows = collections.defaultdict(lambda: [0.0, 0.0, 0])
for op, node, shape in order:
    d = sorted(per[node])[len(per[node])//2]
    if op.startswith("conv"):
        ins, outs, k, s, g = convs[ci]; ci += 1
        fl = 2*outs[0]*outs[1]*outs[2]*outs[3]*ins[1]//g*k[0]*k[1]
        key = f"{ins[1]:>4}->{outs[1]:>4} k{k[0]} s{s[0]} {outs[2]}x{outs[3]}"
        rows[key][0] += d; rows[key][1] += fl; rows[key][2] += 1
    else:
        rows[op][0] += d; rows[op][2] += 1
tot = sum(r[0] for r in rows.values())
for k, (d, fl, n) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
    print(f"{k:<32} n={n:<3} {d/1e3:8.3f} ms {100*d/tot:5.1f}%  " + (f"{fl/d/1e3:7.1f} GFLOP/s" if fl else ""))
print("total kernel ms", tot/1e3, "convs matched", ci, len(convs))
