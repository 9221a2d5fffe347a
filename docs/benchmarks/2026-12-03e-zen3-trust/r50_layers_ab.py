# ResNet-50 int8-static with the stride-1 3x3 convs of chosen stages in int8 too (the AVX2 rule keeps them all fp32,
# Winograd): paired rounds against fp32. python r50_layers_ab.py rounds NAME=STAGES ... (STAGES e.g. 4 or 34; empty = the rule)
import sys, copy, statistics, torch, torchvision, zenith
import importlib; zq = importlib.import_module("zenith.quant.quantize")
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1])
variants = {a.split("=")[0]: a.split("=")[1] for a in sys.argv[2:]}
m = torchvision.models.resnet50().eval()
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
rule = zq._int8_conv_slower
def build(stages):
    mm = copy.deepcopy(m)
    allowed = {id(getattr(mm, f"layer{s}")[i].conv2) for s in map(int, stages) for i in range(len(getattr(mm, f"layer{s}")))}
    zq._int8_conv_slower = lambda conv, isa=None: None if id(conv) in allowed else rule(conv, isa)
    try:
        return zenith.freeze(zenith.quantize(mm, "int8-static", calibration=cal))
    finally:
        zq._int8_conv_slower = rule
v = {"fp32": zenith.freeze(copy.deepcopy(m))}
v.update({k: build(s) for k, s in variants.items()})
names = list(variants)
xs = torch.randn(64, 3, 224, 224)
with torch.no_grad():
    ref = v["fp32"](xs).argmax(1)
    for k in names:
        print(f"{k}: top-1 agreement with fp32 on 64 noise images {(v[k](xs).argmax(1) == ref).float().mean():.3f}")
for B in (1, 8):
    x = torch.randn(B, 3, 224, 224)
    with torch.no_grad():
        ts = paired_rounds(v, rounds, x)
    med = {k: round(statistics.median(t) * 1e3, 2) for k, t in ts.items()}
    print(f"b{B}", med, flush=True)
    for k in names[1:]:
        print(f"  {k}/{names[0]} %.3f [%.3f, %.3f]" % paired_ratio_ci(ts[names[0]], ts[k]), flush=True)
    for k in names:
        print(f"  {k}/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts[k]), flush=True)
