# ResNet-50 fp32 (random init) frozen, per-node kernel time (zenith.profile, median of 15 calls) with each conv's
# GMAC/s (direct-conv MACs / time), sorted by time; totals by kind. python r50_fp32_nodes.py BATCH
import sys, collections, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1])
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
convs = [mod for mod in m.modules() if isinstance(mod, torch.nn.Conv2d)]
# output sizes per conv from a hook
shapes = []
hooks = [c.register_forward_hook(lambda mod, i, o: shapes.append((mod, tuple(o.shape)))) for c in convs]
with torch.no_grad(): m(x)
for h in hooks: h.remove()
from node_times import node_medians
med = node_medians(zenith.freeze(m), x, 15, lambda op, node, shape: (node, op))
conv_nodes = sorted([k for k in med if k[1].startswith("conv")], key=lambda k: k[0])
tot = sum(med.values())
print(f"total {tot/1e3:.2f} ms over {len(med)} nodes; {len(conv_nodes)} conv nodes, {len(shapes)} convs")
rows = []
for (node, op), (mod, oshape) in zip(conv_nodes, shapes):
    macs = oshape[0] * oshape[1] * oshape[2] * oshape[3] * mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1] // mod.groups
    t = med[(node, op)]
    kind = f"{mod.kernel_size[0]}x{mod.kernel_size[1]}s{mod.stride[0]}"
    rows.append((t, node, kind, mod.in_channels, mod.out_channels, oshape[2], macs / t / 1e3))
bykind = collections.defaultdict(float)
for r in rows: bykind[r[2]] += r[0]
print("by kind (ms):", {k: round(v / 1e3, 2) for k, v in bykind.items()}, "other", round((tot - sum(bykind.values())) / 1e3, 2))
for t, node, kind, ci, co, hw, rate in sorted(rows, reverse=True):
    print(f"  {t/1e3:7.3f} ms  node {node:3d} {kind:6s} {ci:4d}->{co:4d} @{hw:3d}  {rate:6.1f} GMAC/s (direct)")
