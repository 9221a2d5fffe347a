import statistics, collections, torch, zenith, sys
torch.manual_seed(0); torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
m = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 7, 2, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1), torch.nn.Conv2d(64, 64, 1), torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 1)).eval()
x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad():
    print("diff", (f(x) - m(x)).abs().max().item())
    for _ in range(5): f(x)
    with zenith.profile(trace="/dev/null") as p:
        for _ in range(50): f(x)
d = collections.defaultdict(list)
for op, node, g, tid, ts, dur, sh in p.events: d[(op, node)].append(dur)
for k, v in d.items(): print(k, round(statistics.median(v), 1))
