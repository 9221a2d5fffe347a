import json, sys, torch, torchvision, collections, statistics
m = torchvision.models.resnet50().eval()
convs = []
hs = [mm.register_forward_hook(lambda mod, i, o: convs.append((i[0].shape[1], o.shape[1], mod.kernel_size[0], mod.stride[0], o.shape[2]))) for mm in m.modules() if isinstance(mm, torch.nn.Conv2d)]
with torch.no_grad(): m(torch.randn(1, 3, 224, 224))
pre = sys.argv[1] if len(sys.argv) > 1 else ""
runs = {v: [json.load(open(f'/tmp/exp/{pre}{v}_{i}.json')) for i in (1, 2, 3)] for v in ("on", "off")}
def per_class(run):
    cs = [r for r in run if r[0].startswith('conv')]
    agg = collections.defaultdict(float); kind = {}
    for cv, a in zip(convs, cs):
        k = f"{cv[0]:>4}->{cv[1]:<4} k{cv[2]} s{cv[3]} {cv[4]}x{cv[4]}"; agg[k] += a[2]; kind[k] = a[0]
    for name in ("to_nchwc", "from_nchwc"): agg[name] = sum(r[2] for r in run if r[0] == name)
    agg["TOTAL"] = sum(r[2] for r in run)
    return agg, kind
A = [per_class(r) for r in runs["on"]]; B = [per_class(r) for r in runs["off"]]
kind = A[0][1]
rows = []
for k in A[0][0]:
    a = statistics.median(x[0][k] for x in A); b = statistics.median(x[0][k] for x in B)
    rows.append((k, a, b))
for k, a, b in sorted(rows, key=lambda r: r[1] - r[2]):
    print(f"{k:<28} {kind.get(k, ''):<14} on {a:7.3f} off {b:7.3f} ratio {a/b if b else 0:.2f}")
