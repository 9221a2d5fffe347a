# ResNet-50 int8-static with and without one more keep-fp32 rule in zenith.quantize (AVX2: 1x1 convs on <= CIN
# input channels stay fp32), both frozen in one process, called in alternating rounds with fp32 (paired_rounds).
# python r50_rule_ab.py <batch> [rounds] [cin]
import copy, statistics, sys, torch, torchvision, zenith
import importlib; zq = importlib.import_module("zenith.quant.quantize")
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
cin = int(sys.argv[3]) if len(sys.argv) > 3 else 64
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
old_rule = zq._int8_conv_slower
def new_rule(conv, isa=None):
    if conv.kernel_size == (1, 1) and conv.groups == 1 and conv.in_channels <= cin:
        return "kept (experiment)"
    return old_rule(conv, isa)
q_old = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
zq._int8_conv_slower = new_rule
q_new = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
zq._int8_conv_slower = old_rule
v = {"fp32": zenith.freeze(m), "old": zenith.freeze(q_old), "new": zenith.freeze(q_new)}
with torch.no_grad():
    ref = m(x)
    for k, f in v.items():
        y = f(x)
        print(k, "max abs err vs eager fp32", float((y - ref).abs().max()),
              "top-1 agree", float((y.argmax(1) == ref.argmax(1)).float().mean()))
    ts = paired_rounds(v, rounds, x)
med = {k: statistics.median(t) * 1e3 for k, t in ts.items()}
r, lo, hi = paired_ratio_ci(ts["old"], ts["new"])
print(f"resnet50 b{B} cin<={cin}: fp32 {med['fp32']:.2f} ms, int8 old {med['old']:.2f}, new {med['new']:.2f}; "
      f"new / old {r:.3f} [{lo:.3f}, {hi:.3f}]; int8 / fp32: old {paired_ratio_ci(ts['fp32'], ts['old'])[0]:.3f}, "
      f"new {paired_ratio_ci(ts['fp32'], ts['new'])[0]:.3f}")
