import torch, torchvision, zenith, sys, collections
torch.set_num_threads(2)
m = getattr(torchvision.models, sys.argv[1])().eval()
x = torch.randn(int(sys.argv[2]), 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad():
    f(x)
    with zenith.profile(trace="/tmp/t.json") as p: f(x)
for op, node, graph, tid, ts, dur, shape in p.events:
    print(node, op, tuple(shape), f"{dur:.0f}us")
