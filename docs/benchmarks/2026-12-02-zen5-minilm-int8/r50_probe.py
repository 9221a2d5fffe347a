# One process's ResNet-50 int8-static / fp32 time at batch 1 and 8 (zenith.freeze, paired rounds), for comparing
# two builds of _C in alternating processes (ab_builds.sh with PROBE=r50_probe.py): python r50_probe.py [rounds]
import sys, copy, statistics, torch, torchvision, zenith
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
m = torchvision.models.resnet50().eval()
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
out = []
for B in (1, 8):
    x = torch.randn(B, 3, 224, 224)
    v = {"fp32": zenith.freeze(copy.deepcopy(m)), "int8": zenith.freeze(copy.deepcopy(q))}
    with torch.no_grad():
        ts = paired_rounds(v, rounds, x)
    out.append(f"b{B} fp32 {statistics.median(ts['fp32'])*1e3:.2f} ms int8 {statistics.median(ts['int8'])*1e3:.2f} ms "
               f"int8/fp32 {paired_ratio_ci(ts['fp32'], ts['int8'])[0]:.4f}")
print("; ".join(out))
