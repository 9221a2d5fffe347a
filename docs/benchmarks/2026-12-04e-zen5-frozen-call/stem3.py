import torch, torch.nn as nn, zenith, statistics, os, sys
torch.manual_seed(0); torch.set_num_threads(int(os.environ.get("TH", 2)))
k = int(sys.argv[1]); cout = int(sys.argv[2]); pad = int(sys.argv[3]) if len(sys.argv) > 3 else k // 2
mod = nn.Sequential(nn.Conv2d(3, cout, k, 2, pad, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                    nn.Conv2d(cout, 64, 1), nn.ReLU(), nn.Conv2d(64, 64, 1)).eval()
x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(mod)
with torch.no_grad():
    for _ in range(5): f(x)
    with zenith.profile(trace="/dev/null") as p:
        for _ in range(100): f(x)
per = {}
for e in p.events: per.setdefault((e[1], e[0]), []).append(e[5])
print(os.environ.get("ZENITH_NCHWC"), {kk: round(statistics.median(v), 1) for kk, v in per.items()})
