# Paired A/B on ResNet-50 (zenith.freeze): fp32, int8-static as zenith.quantize makes it, and
# int8-static with the 3x3 stride-1 convs that fp32 runs by Winograd (64+ channels in and
# out) kept fp32 (quantize's rule monkeypatched). python q_keep3x3_ab.py <batch> [rounds]
# (Run at e81f30d; 0b44c27 made the kept variant the default where the int8 kernels have no VNNI.)
import os, sys, copy, time, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
zq = sys.modules["zenith.quant.quantize"]
rule = zq._int8_conv_slower
def keep_winograd(conv):
    if (conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (1, 1) and conv.groups == 1
            and conv.dilation == (1, 1) and conv.in_channels >= 64 and conv.out_channels >= 64):
        return "fp32 runs it by Winograd"
    return rule(conv)
zq._int8_conv_slower = keep_winograd
k = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
zq._int8_conv_slower = rule
print("kept fp32:", sorted(zenith.quant.summary(k).kept))
models = {}
with torch.no_grad():
    ref = m(x)
    for name, mod in (("fp32", m), ("int8", q), ("int8-keep3x3", k)):
        models[name] = zenith.freeze(mod)
        out = models[name](x)
        print(f"{name}: max |out - eager fp32| {float((out - ref).abs().max()):.4f}")
    names = list(models); ts = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t = time.perf_counter(); models[n](x); ts[n].append(time.perf_counter() - t)
for n in names:
    ra = sorted(b / a for a, b in zip(ts["fp32"], ts[n]))
    print(f"resnet50 b{B} {n:<13} median {statistics.median(ts[n])*1e3:8.2f} ms  / fp32 {statistics.median(ra):.3f} "
          f"[p25 {ra[len(ra)//4]:.3f}, p75 {ra[3*len(ra)//4]:.3f}]")
