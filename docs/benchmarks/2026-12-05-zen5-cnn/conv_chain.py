# A chain of `n` distinct 3x3 convs (C -> C, stride 1, ReLU) on an HxW map, batch b, frozen:
# per-conv median time (zenith.profile) with the chain's weights past L3 (n large) or warm (n = 1).
# python conv_chain.py C H b n
import sys, statistics, collections, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
C, H, b, n = (int(a) for a in sys.argv[1:5])
layers = []
for _ in range(n): layers += [torch.nn.Conv2d(C, C, 3, padding=1), torch.nn.ReLU()]
m = torch.nn.Sequential(*layers).eval(); x = torch.randn(b, C, H, H)
f = zenith.freeze(m)
with torch.no_grad():
    ref = m(x); out = f(x); print("max abs diff", (out - ref).abs().max().item())
    for _ in range(3): f(x)
    with zenith.profile(trace="/tmp/conv_chain.json") as p:
        for _ in range(max(3, 60 // n)): f(x)
per = collections.defaultdict(list)
for op, node, graph, tid, ts, dur, shape in p.events: per[op].append(dur)
for op, d in per.items():
    med = statistics.median(d)
    g = f" {2 * b * H * H * C * C * 9 / med / 1e3:.0f} GF/s (direct FLOPs)" if "conv" in op else ""
    print(f"{op}: {len(d)} calls, median {med:.1f} us{g}")
