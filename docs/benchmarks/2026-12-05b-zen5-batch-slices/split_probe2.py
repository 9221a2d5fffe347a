import torch, torchvision, zenith, time, statistics, random, sys
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1]
m = getattr(torchvision.models, name)().eval()
if name.startswith("resnet"):
    p = torch.nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1).eval()
else:
    p = m.features[:4].eval()
x = torch.randn(8, 3, 224, 224)
with torch.no_grad():
    fz = {s: zenith.freeze(p) for s in (8, 4, 2, 1)}
    xs = {s: [x[i:i+s].contiguous() for i in range(0, 8, s)] for s in fz}
    for s in fz:
        for _ in range(3): [fz[s](a) for a in xs[s]]
    res = {s: [] for s in fz}
    for r in range(20):
        order = list(fz); random.shuffle(order)
        for s in order:
            t0 = time.perf_counter(); [fz[s](a) for a in xs[s]]; res[s].append(time.perf_counter() - t0)
    # one call's overhead: time a 1x1x1x1 identity-ish? use tiny model
    for s in fz: print(f"slices of {s}: {statistics.median(res[s])*1e3:.2f} ms")
