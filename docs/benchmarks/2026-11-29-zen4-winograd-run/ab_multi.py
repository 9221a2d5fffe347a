# Paired A/B of call-time env settings: python ab_multi.py <model> <batch> SPEC...; SPEC "-" (none) or "A=1,B=2".
import os, sys, time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
name, B = sys.argv[1], int(sys.argv[2]); specs = sys.argv[3:]
rounds = int(os.environ.get("ROUNDS", 60 if B == 1 else 20))
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
c = torch.compile(m, backend="zenith")
keys = sorted({kv.split("=")[0] for s in specs if s != "-" for kv in s.split(",")})
def setv(s):
    for k in keys: os.environ.pop(k, None)
    if s != "-":
        for kv in s.split(","): k, v = kv.split("="); os.environ[k] = v
ts = {s: [] for s in specs}
with torch.no_grad():
    ref = m(x)
    for s in specs: setv(s); c(x); c(x)
    for r in range(rounds):
        for s in specs[r % len(specs):] + specs[:r % len(specs)]:
            setv(s); t = time.perf_counter(); out = c(x); ts[s].append(time.perf_counter() - t)
            assert torch.allclose(out, ref, rtol=1e-3, atol=1e-5 * ref.abs().max().item())
base = ts[specs[0]]
for s, v in ts.items():
    r = sorted(b / a for a, b in zip(base, v))
    print(f"{name} b{B} {s:<22} median {statistics.median(v)*1e3:8.3f} ms  ratio {statistics.median(r):.3f} [p25 {r[len(r)//4]:.3f}, p75 {r[3*len(r)//4]:.3f}]")
