# A/B of a setting read when a graph is compiled (an environment variable), in one process
# with the variants' calls interleaved: python ab_env.py <batch> <torchvision model> VAR val1 val2 ...
# ("-" leaves VAR unset). Each variant is its own subclass of the model's class, so Dynamo
# compiles it afresh (a deep copy of the same class reuses the first graph: torch 2.14
# inlines nn.Modules and passes their weights as inputs). The variants this session's
# diary compares (XDW, XPWDW, XORDER) were temporary switches, not in the tree; with
# ZENITH_NCHWC=0 / unset it compares the blocked layout against none.
import os, sys, time, copy, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); name = sys.argv[2]; var = sys.argv[3]; vals = sys.argv[4:]
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
with torch.no_grad(): ref = m(x)
cs = []
for i, v in enumerate(vals):
    if v == "-": os.environ.pop(var, None)
    else: os.environ[var] = v
    mi = copy.deepcopy(m); mi.__class__ = type(f"V{i}", (type(m),), {})
    c = torch.compile(mi, backend="zenith")
    with torch.no_grad(): out = c(x)
    print(v, "rel err", ((out - ref).abs().max() / ref.abs().max()).item(), flush=True)
    cs.append(c)
os.environ.pop(var, None)
ts = {v: [] for v in vals}
R = 40 if B == 1 else 12
with torch.no_grad():
    for c in cs:
        for _ in range(3): c(x)
    for r in range(R):
        for v, c in zip(vals, cs):
            t = time.perf_counter(); c(x); ts[v].append(time.perf_counter() - t)
for v in vals:
    s = sorted(ts[v]); print(f"{var}={v:<12} median {statistics.median(s)*1e3:8.3f} ms  p10 {s[len(s)//10]*1e3:8.3f}")
