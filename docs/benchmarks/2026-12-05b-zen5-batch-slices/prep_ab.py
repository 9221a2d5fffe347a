# In-process A/B of a prepare-time choice: one frozen copy of a torchvision model per value of
# the environment variable argv[1] (set during that copy's first call, when its kernels are
# chosen), then calls alternated in shuffled rounds (abrounds.py).
# python prep_ab.py ENV model batch v1,v2,... [rounds]; ratios are time / the first value's.
import copy, os, sys, torch, torchvision, zenith
from abrounds import report, rounds
torch.manual_seed(0); torch.set_num_threads(2)
env, name, b, vals = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
n = int(sys.argv[5]) if len(sys.argv) > 5 else 30
m = getattr(torchvision.models, name.replace("-", "_"))().eval()
x = torch.randn(b, 3, 224, 224)
fs = {}
with torch.no_grad():
    ref = m(x)
    for v in vals:
        os.environ[env] = v
        fs[v] = zenith.freeze(copy.deepcopy(m))
        print(f"{env}={v}: max abs diff vs eager {(fs[v](x) - ref).abs().max().item():.3g}")
    os.environ.pop(env)
    res = rounds(vals, n, lambda v: fs[v](x))
report(f"{name} b{b}", env, vals, res)
