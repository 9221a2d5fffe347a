import sys, time, torch, copy, torchvision, zenith, collections
torch.manual_seed(0)
m = getattr(torchvision.models, sys.argv[1])(num_classes=10); m.train(); x = torch.randn(4, 3, 64, 64)
c = torch.compile(m, backend="zenith")
def run():
    m.zero_grad(set_to_none=True); c(x).pow(2).mean().backward()
for _ in range(3): run()
with zenith.profile(trace="/tmp/s59/t.json") as p:
    run()
agg = collections.defaultdict(lambda: [0, 0.0])
for (op, node, graph, tid, ts, dur, shape) in p.events:
    k = (op, tuple(shape)); agg[k][0] += 1; agg[k][1] += dur
for k, (n, d) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"{k[0]:12s} {str(k[1]):22s} x{n:3d} {d/1e3:8.3f} ms  {d/n:8.1f} us")
