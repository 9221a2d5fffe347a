# n torchvision Bottleneck blocks (inplanes = 4 x planes, no downsampling) on an HxW map at
# batch b, frozen: each conv node's median time (zenith.profile) and GFLOP/s, per position
# in the block (conv1 1x1 reduce, conv2 3x3, conv3 1x1 expand + residual + ReLU).
# python bottleneck_chain.py planes H b n
import sys, statistics, collections, torch, zenith
from torchvision.models.resnet import Bottleneck
torch.manual_seed(0); torch.set_num_threads(2)
planes, H, b, n = (int(a) for a in sys.argv[1:5])
m = torch.nn.Sequential(*[Bottleneck(4 * planes, planes) for _ in range(n)]).eval()
for mod in m.modules():
    if isinstance(mod, torch.nn.BatchNorm2d):
        mod.running_mean.normal_(); mod.running_var.uniform_(0.5, 2); mod.weight.data.normal_(); mod.bias.data.normal_()
x = torch.randn(b, 4 * planes, H, H)
f = zenith.freeze(m)
with torch.no_grad():
    ref = m(x); print("max abs diff", (f(x) - ref).abs().max().item())
    for _ in range(3): f(x)
    with zenith.profile(trace="/tmp/bneck.json") as p:
        for _ in range(max(5, 60 // n)): f(x)
per = collections.defaultdict(list)
order = []
for op, node, graph, tid, ts, dur, shape in p.events:
    if op == "conv2d_nchwc":
        if node not in per: order.append(node)
        per[node].append(dur)
macs = [b * H * H * 4 * planes * planes, b * H * H * planes * planes * 9, b * H * H * planes * 4 * planes]
pos = collections.defaultdict(list)
for i, node in enumerate(order): pos[i % 3].append(statistics.median(per[node]))
for i, name in enumerate(["conv1 1x1 reduce", "conv2 3x3", "conv3 1x1 expand+res"]):
    med = statistics.median(pos[i])
    print(f"{name}: median over {len(pos[i])} nodes {med:.1f} us, {2 * macs[i] / med / 1e3:.0f} GF/s")
