# Per-node time of a frozen CNN (torchvision, random init), b = argv[2]: each node's median
# over 20 traced calls, its output shape, and for convs the GFLOP/s against the FMA ceiling.
import sys, torch, torchvision, zenith, collections, statistics
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "resnet50"; b = int(sys.argv[2]) if len(sys.argv) > 2 else 1
m = getattr(torchvision.models, name.replace("-", "_"))().eval()
x = torch.randn(b, 3, 224, 224)
# FLOPs per conv, in module order (conv nodes run in this order after BN folding)
convs = [mod for mod in m.modules() if isinstance(mod, torch.nn.Conv2d)]
shapes = {}
hooks = [c.register_forward_hook(lambda mod, i, o: shapes.__setitem__(mod, o.shape)) for c in convs]
with torch.no_grad(): m(x)
for h in hooks: h.remove()
macs = [shapes[c].numel() * c.in_channels // c.groups * c.kernel_size[0] * c.kernel_size[1] for c in convs]
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(x)
    with zenith.profile(trace="/tmp/cnn_trace.json") as p:
        for _ in range(20): f(x)
per = collections.defaultdict(list); order = []; info = {}
for op, node, graph, tid, ts, dur, shape in p.events:
    key = (graph, node)
    if key not in per: order.append(key); info[key] = (op, shape)
    per[key].append(dur)
tot = 0; ci = 0; rows = []
for key in order:
    op, shape = info[key]; med = statistics.median(per[key]); tot += med
    g = ""
    if "conv" in op and ci < len(macs):
        g = f"{2 * macs[ci] / med / 1e3:7.1f} GF/s {macs[ci]/1e6:7.1f} MMAC"; ci += 1
    rows.append((med, op, key[1], tuple(shape), g))
for med, op, node, shape, g in rows:
    print(f"{med:8.1f} us {op:28s} {str(node):28s} {str(shape):22s} {g}")
print(f"sum of node medians {tot/1e3:.2f} ms; convs matched {ci}/{len(macs)}")
