# ResNet-50 int8-static (random init, calibrated on 4 batches of noise), frozen, variants by temporary env switches
# (each set = that part the old way); paired rounds; fp32 for the ratio. python r50_env_ab.py rounds NAME=VAR1,VAR2 ...
# The 32-byte code stores were measured as `r50_env_ab.py 12 old=ZENITH_EXP_CODES8 new=` does (a ZENITH_EXP_CODES8
# switch, set = 8-byte stores, in store_blocked; ab_outputs.txt's runs used an earlier two-variant copy of this script).
import os, sys, copy, statistics, torch, torchvision, zenith
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1])
variants = {a.split("=")[0]: [e for e in a.split("=")[1].split(",") if e] for a in sys.argv[2:]}
allvars = sorted({e for v in variants.values() for e in v})
m = torchvision.models.resnet50().eval()
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
fp = zenith.freeze(copy.deepcopy(m))
q = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal))
def sw(envs):
    def f(*a):
        for e in allvars:
            if e in envs: os.environ[e] = "1"
            else: os.environ.pop(e, None)
        return q(*a)
    return f
v = {"fp32": fp}
v.update({k: sw(e) for k, e in variants.items()})
names = list(variants)
for B in (1, 8):
    x = torch.randn(B, 3, 224, 224)
    with torch.no_grad():
        outs = [v[k](x) for k in names]
        print(f"b{B} outputs bit-identical:", all(torch.equal(outs[0], o) for o in outs[1:]))
        ts = paired_rounds(v, rounds, x)
    med = {k: round(statistics.median(t) * 1e3, 2) for k, t in ts.items()}
    print(f"b{B}", med, flush=True)
    for k in names[1:]:
        print(f"  {k}/{names[0]} %.3f [%.3f, %.3f]" % paired_ratio_ci(ts[names[0]], ts[k]), flush=True)
    for k in names:
        print(f"  {k}/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts[k]), flush=True)
for e in allvars: os.environ.pop(e, None)
