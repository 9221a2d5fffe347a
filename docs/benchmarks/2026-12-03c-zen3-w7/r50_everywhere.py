import sys, copy, statistics, torch, torchvision, zenith
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
m = torchvision.models.resnet50().eval()
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
v = {"fp32": zenith.freeze(copy.deepcopy(m)),
     "int8": zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)),
     "int8all": zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, int8_everywhere=True))}
for B in (1, 8):
    x = torch.randn(B, 3, 224, 224)
    with torch.no_grad():
        ts = paired_rounds(v, rounds, x)
    med = {k: statistics.median(t) * 1e3 for k, t in ts.items()}
    print(f"b{B}", {k: round(t, 2) for k, t in med.items()},
          "int8/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts["int8"]),
          "int8all/fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["fp32"], ts["int8all"]),
          "int8all/int8 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["int8"], ts["int8all"]), flush=True)
