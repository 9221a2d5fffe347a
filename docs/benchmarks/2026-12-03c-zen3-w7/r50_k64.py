# ResNet-50 int8-static: default against the same with layer1's 1x1 convs over 64 input channels kept fp32
import sys, copy, statistics, torch, torchvision, zenith
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
m = torchvision.models.resnet50().eval()
k64 = [n for n, mod in m.named_modules() if isinstance(mod, torch.nn.Conv2d) and mod.kernel_size == (1, 1) and mod.in_channels == 64]
print("kept fp32:", k64)
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
v = {"fp32": zenith.freeze(copy.deepcopy(m)),
     "int8": zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)),
     "int8-k64fp32": zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, exclude=k64))}
for B in (1, 8):
    x = torch.randn(B, 3, 224, 224)
    with torch.no_grad():
        ts = paired_rounds(v, rounds, x)
    med = {k: round(statistics.median(t) * 1e3, 2) for k, t in ts.items()}
    print(f"b{B}", med, "int8/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts["int8"]),
          "k64fp32/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts["int8-k64fp32"]),
          "k64fp32/int8 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["int8"], ts["int8-k64fp32"]), flush=True)
