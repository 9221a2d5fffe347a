# A/B of a setting read when a graph is compiled (an environment variable), each variant
# frozen by zenith.freeze (captured at its first call, so the variable applies to it
# alone), calls interleaved in one process: python ab_freeze.py <batch> <torchvision
# model> VAR val1 val2 ... ("-" leaves VAR unset). The switches this session's diary
# compares (XSTEM) were temporary, not in the tree.
import os, sys, time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); name = sys.argv[2]; var = sys.argv[3]; vals = sys.argv[4:]
m = getattr(torchvision.models, name)().train()
with torch.no_grad():  # batch-norm statistics of random batches, so activations keep their scale
    for _ in range(2): m(torch.randn(4, 3, 224, 224))
m.eval(); x = torch.randn(B, 3, 224, 224)
with torch.no_grad(): ref = m(x)
fs = []
for v in vals:
    if v == "-": os.environ.pop(var, None)
    else: os.environ[var] = v
    f = zenith.freeze(m)
    with torch.no_grad(): out = f(x)
    print(v, "rel err", ((out - ref).abs().max() / ref.abs().max()).item(), flush=True)
    fs.append(f)
os.environ.pop(var, None)
ts = {v: [] for v in vals}
R = int(os.environ.get("AB_ROUNDS", 60 if B == 1 else 15))
with torch.no_grad():
    for f in fs:
        for _ in range(3): f(x)
    for r in range(R):
        for v, f in zip(vals, fs):
            t = time.perf_counter(); f(x); ts[v].append(time.perf_counter() - t)
for v in vals:
    s = sorted(ts[v]); print(f"{var}={v:<12} median {statistics.median(s)*1e3:8.3f} ms  p10 {s[len(s)//10]*1e3:8.3f}")
