# ResNet-50 (random init) held to whatever ISA the environment says (ZENITH_NO_AVX512=1: AVX2), frozen, one process:
# fp32, int8-static (default: 3x3 stride-1 convs kept fp32 without VNNI) and int8-static with int8_everywhere=True,
# rounds alternated in shuffled order; per-round ratios to fp32, median [p25, p75]. python r50_everywhere.py BATCH ROUNDS
import sys, copy, random, time, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b, rounds = int(sys.argv[1]), int(sys.argv[2])
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(2, 3, 224, 224),) for _ in range(4)]
models = {"fp32": m,
          "int8": zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal),
          "int8-all": zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, int8_everywhere=True)}
f = {k: zenith.freeze(v) for k, v in models.items()}
with torch.no_grad():
    ref = m(x)
    for k, g in f.items():
        y = g(x)
        print(k, "top-1 agreement with eager fp32", (y.argmax(1) == ref.argmax(1)).float().mean().item(),
              "max|err|", (y - ref).abs().max().item())
        for _ in range(2): g(x)
    t = {k: [] for k in f}
    for r in range(rounds):
        order = list(f); random.shuffle(order)
        for k in order:
            t0 = time.perf_counter(); f[k](x); t[k].append(time.perf_counter() - t0)
def q(v, p): v = sorted(v); return v[int(p * (len(v) - 1))]
for k in f:
    rat = [a / c for a, c in zip(t[k], t["fp32"])]
    print(f"{k:9s} median {statistics.median(t[k])*1e3:8.2f} ms  / fp32 {statistics.median(rat):.3f} [{q(rat,.25):.3f}, {q(rat,.75):.3f}]")
