import sys, torch, torchvision, zenith, collections
torch.set_num_threads(2)
m = getattr(torchvision.models, sys.argv[1])().eval(); x = torch.randn(8, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    c(x)
    with zenith.profile(trace="/tmp/exp/w.json") as p:
        c(x)
agg = collections.defaultdict(lambda: [0, 0.0])
for op, node, graph, tid, ts, dur, shape in p.events:
    agg[op][0] += 1; agg[op][1] += dur / 1e3
for k, v in sorted(agg.items(), key=lambda kv: -kv[1][1]): print(f"{k:<16} n={v[0]:<4} {v[1]:8.3f} ms")
print([ (op, str(shape)) for op, node, graph, tid, ts, dur, shape in p.events if op in ("conv2d_nchwc",)][:40])
