# ResNet-50 int8-static (random init, calibrated on 4 batches of noise), frozen: the codes-alone write-out 8 channels
# a store (ZENITH_EXP_CODES8 set, the old way) against 32; fp32 for the ratio; paired rounds.
# python r50_codes_ab.py [rounds]
import os, sys, copy, statistics, torch, torchvision, zenith
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
m = torchvision.models.resnet50().eval()
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
fp = zenith.freeze(copy.deepcopy(m))
q = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal))
def sw(mod, on):
    def f(*a):
        if on: os.environ["ZENITH_EXP_CODES8"] = "1"
        else: os.environ.pop("ZENITH_EXP_CODES8", None)
        return mod(*a)
    return f
v = {"fp32": fp, "old": sw(q, True), "new": sw(q, False)}
for B in (1, 8):
    x = torch.randn(B, 3, 224, 224)
    with torch.no_grad():
        print(f"b{B} outputs bit-identical:", torch.equal(v["old"](x), v["new"](x)))
        ts = paired_rounds(v, rounds, x)
    med = {k: round(statistics.median(t) * 1e3, 2) for k, t in ts.items()}
    print(f"b{B}", med, "new/old %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["old"], ts["new"]),
          "old/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts["old"]),
          "new/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts["new"]), flush=True)
os.environ.pop("ZENITH_EXP_CODES8", None)
