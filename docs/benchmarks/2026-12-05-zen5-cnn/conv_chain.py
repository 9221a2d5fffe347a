# A chain of `n` distinct k x k convs (C -> C, stride 1, ReLU; k = argv[5], default 3) on an
# HxW map, batch b, frozen: per-conv median time (zenith.profile) with the chain's weights
# past L3 (n large) or in it (n small). python conv_chain.py C H b n [k]
import sys, statistics, collections, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
C, H, b, n = (int(a) for a in sys.argv[1:5]); k = int(sys.argv[5]) if len(sys.argv) > 5 else 3
layers = []
for _ in range(n): layers += [torch.nn.Conv2d(C, C, k, padding=k // 2), torch.nn.ReLU()]
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
    g = f" {2 * b * H * H * C * C * k * k / med / 1e3:.0f} GF/s (direct FLOPs)" if "conv" in op else ""
    print(f"{op}: {len(d)} calls, median {med:.1f} us{g}")
