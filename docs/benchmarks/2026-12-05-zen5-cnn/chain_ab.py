# In-process A/B of a run-time switch (environment variable argv[1], read by the C++ per
# call) on conv_chain.py's chain: n distinct 3x3 convs C -> C on an H x W map, batch b,
# frozen; calls alternate between the values in shuffled rounds (abrounds.py), time per conv.
# python chain_ab.py ENV C H b n v1,v2,... [rounds]; ratios are time / the first value's.
import sys, torch, zenith
from abrounds import report, rounds, switched
torch.manual_seed(0); torch.set_num_threads(2)
env = sys.argv[1]; C, H, b, n = (int(a) for a in sys.argv[2:6]); vals = sys.argv[6].split(",")
r = int(sys.argv[7]) if len(sys.argv) > 7 else 30
layers = []
for _ in range(n): layers += [torch.nn.Conv2d(C, C, 3, padding=1), torch.nn.ReLU()]
m = torch.nn.Sequential(*layers).eval(); x = torch.randn(b, C, H, H)
f = zenith.freeze(m)

call = switched(env, lambda: f(x))
with torch.no_grad():
    ref = m(x)
    for v in vals:
        print(f"{env}={v}: max abs diff {(call(v) - ref).abs().max().item():.3g}")
    res = rounds(vals, r, call, per=n)
report(f"{C} ch {H}x{H} b{b}: a conv,", env, vals, res, scale=1e6, unit="us")
