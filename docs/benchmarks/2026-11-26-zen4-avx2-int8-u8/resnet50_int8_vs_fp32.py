"""ResNet-50 (random init), fp32 and int8-static (percentile calibration on 4 random
batches) compiled with Zenith in one process, calls interleaved: per-round ratio of
int8-static to fp32 time. python resnet50_int8_vs_fp32.py BATCH ROUNDS"""
import sys, copy, statistics as st, time, torch, torchvision, zenith

torch.manual_seed(0)
m = torchvision.models.resnet50().eval()
b, rounds = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(b, 3, 224, 224)
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=[(torch.randn(b, 3, 224, 224),) for _ in range(4)])
cf, cq = torch.compile(m, backend="zenith"), torch.compile(q, backend="zenith")
ts = {"fp32": [], "int8-static": []}
with torch.no_grad():
    for _ in range(2):
        cf(x), cq(x)
    for _ in range(rounds):
        for k, f in (("fp32", cf), ("int8-static", cq)):
            t = time.perf_counter()
            f(x)
            ts[k].append(time.perf_counter() - t)
    top1 = (cf(x).argmax(-1) == cq(x).argmax(-1)).float().mean().item()
r = sorted(a / c for a, c in zip(ts["int8-static"], ts["fp32"]))
print(f"resnet50 b{b}: fp32 {st.median(ts['fp32']) * 1e3:.1f} ms, int8-static {st.median(ts['int8-static']) * 1e3:.1f} ms; "
      f"per-round ratio median {st.median(r):.3f} (p25 {r[len(r) // 4]:.3f}, p75 {r[3 * len(r) // 4]:.3f}); "
      f"top-1 agreement on this batch {top1:.2f}")
