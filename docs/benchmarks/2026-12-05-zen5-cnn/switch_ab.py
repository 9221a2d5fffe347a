# In-process A/B of a run-time switch (environment variable argv[1], read by the C++ per
# call) on one frozen torchvision model: calls alternate between the values in shuffled
# rounds (abrounds.py). python switch_ab.py ENV model batch v1,v2,... [rounds]
import sys, torch, torchvision, zenith
from abrounds import report, rounds, switched
torch.manual_seed(0); torch.set_num_threads(2)
env, name, b, vals = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
n = int(sys.argv[5]) if len(sys.argv) > 5 else 30
m = getattr(torchvision.models, name.replace("-", "_"))().eval(); x = torch.randn(b, 3, 224, 224)
f = zenith.freeze(m)

call = switched(env, lambda: f(x))
with torch.no_grad():
    ref = m(x)
    for v in vals:
        print(f"{env}={v}: max abs diff vs eager {(call(v) - ref).abs().max().item():.3g}")
    res = rounds(vals, n, call)
report(f"{name} b{b}", env, vals, res)
