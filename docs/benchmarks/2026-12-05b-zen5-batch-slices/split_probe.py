import torch, torchvision, zenith, time, statistics, random, sys
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
m = getattr(torchvision.models, name)().eval()
if name.startswith("resnet"):
    parts = {"stem+l1": torch.nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1),
             "l2": m.layer2, "l3": m.layer3}
else:
    f = m.features
    parts = {"f0-3": f[:4], "f4-6": f[4:7], "f7-13": f[7:14]}
x = torch.randn(8, 3, 224, 224)
ins = {}
with torch.no_grad():
    h = x
    for k, p in parts.items(): ins[k] = h; h = p(h)
    runs = {}
    for k, p in parts.items():
        p.eval(); fz8 = zenith.freeze(p); fz1 = zenith.freeze(p)
        x8 = ins[k]; x1s = [x8[i:i+1].contiguous() for i in range(8)]
        for _ in range(3): fz8(x8); [fz1(a) for a in x1s]
        runs[k] = (fz8, fz1, x8, x1s)
    res = {k: ([], []) for k in parts}
    for r in range(15):
        order = list(parts); random.shuffle(order)
        for k in order:
            fz8, fz1, x8, x1s = runs[k]
            t0 = time.perf_counter(); fz8(x8); t1 = time.perf_counter()
            for a in x1s: fz1(a)
            t2 = time.perf_counter()
            res[k][0].append(t1 - t0); res[k][1].append(t2 - t1)
    for k, (a, b) in res.items():
        print(f"{k}: b8 {statistics.median(a)*1e3:.2f} ms, 8 x b1 {statistics.median(b)*1e3:.2f} ms, ratio {statistics.median([y/x for x,y in zip(a,b)]):.3f}")
