# Paired A/B of call-time env settings on ResNet-50 int8-static: python q_ab.py <batch> SPEC...; SPEC "-" or "A=1"
import os, sys, copy, time, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); specs = sys.argv[2:]; rounds = int(os.environ.get("ROUNDS", 20))
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
c = torch.compile(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal), backend="zenith")
keys = sorted({kv.split("=")[0] for s in specs if s != "-" for kv in s.split(",")})
def setv(s):
    for k in keys: os.environ.pop(k, None)
    if s != "-":
        for kv in s.split(","): k, v = kv.split("="); os.environ[k] = v
ts = {s: [] for s in specs}
with torch.no_grad():
    ref = c(x)
    for s in specs: setv(s); c(x)
    for r in range(rounds):
        for s in specs[r % len(specs):] + specs[:r % len(specs)]:
            setv(s); t = time.perf_counter(); out = c(x); ts[s].append(time.perf_counter() - t)
            assert torch.equal(out, ref)
base = ts[specs[0]]
for s, v in ts.items():
    r = sorted(b / a for a, b in zip(base, v))
    print(f"resnet50 int8-static b{B} {s:<12} median {statistics.median(v)*1e3:8.3f} ms  ratio {statistics.median(r):.3f} [p25 {r[len(r)//4]:.3f}, p75 {r[3*len(r)//4]:.3f}]")
