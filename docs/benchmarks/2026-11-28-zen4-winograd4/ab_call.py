# A/B of a switch read at call time: python ab_call.py <batch> <model> VAR
import os, sys, time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); name = sys.argv[2]; var = sys.argv[3]
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
with torch.no_grad(): ref = m(x)
f = zenith.freeze(m)
ts = {"off": [], "on": []}
R = int(os.environ.get("AB_ROUNDS", 60 if B == 1 else 15))
with torch.no_grad():
    for v in ("off", "on"):
        if v == "on": os.environ[var] = "1"
        else: os.environ.pop(var, None)
        out = f(x); print(v, "max abs err", (out - ref).abs().max().item())
    for r in range(R):
        for v in ("off", "on"):
            if v == "on": os.environ[var] = "1"
            else: os.environ.pop(var, None)
            t = time.perf_counter(); f(x); ts[v].append(time.perf_counter() - t)
for v in ts:
    s = sorted(ts[v]); print(f"{var} {v:<4} median {statistics.median(s)*1e3:8.3f} ms  p10 {s[len(s)//10]*1e3:8.3f}")
