"""ResNet-50 (random init), fp32 and int8-static (percentile calibration on 4 random
batches) compiled with Zenith in one process, calls interleaved: int8-static as
zenith.quantize now makes it (the stem and the 1x1 convs over 56 x 56 maps kept fp32,
where int8 measured slower) and with int8_everywhere=True (every conv int8, as before).
Per-round ratios to fp32's time. python resnet50_int8_vs_fp32.py BATCH ROUNDS"""
import sys, copy, statistics as st, time, torch, torchvision, zenith

torch.manual_seed(0)
torch.set_num_threads(2)
m = torchvision.models.resnet50().eval()
b, rounds = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(b, 3, 224, 224),) for _ in range(4)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
e = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, int8_everywhere=True)
print("kept fp32:", {k: v.split(":")[1].strip() for k, v in zenith.quant.summary(q).kept.items()})
fns = {"fp32": torch.compile(m, backend="zenith"), "int8-static": torch.compile(q, backend="zenith"),
       "int8 everywhere": torch.compile(e, backend="zenith")}
ts = {k: [] for k in fns}
with torch.no_grad():
    for _ in range(2):
        for f in fns.values():
            f(x)
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            t = time.perf_counter()
            fns[k](x)
            ts[k].append(time.perf_counter() - t)
    ref = fns["fp32"](x).argmax(-1)
    top1 = {k: (fns[k](x).argmax(-1) == ref).float().mean().item() for k in ("int8-static", "int8 everywhere")}
for k in ("int8-static", "int8 everywhere"):
    r = sorted(a / c for a, c in zip(ts[k], ts["fp32"]))
    print(f"resnet50 b{b}: fp32 {st.median(ts['fp32']) * 1e3:.1f} ms, {k} {st.median(ts[k]) * 1e3:.1f} ms; "
          f"per-round ratio median {st.median(r):.3f} (p25 {r[len(r) // 4]:.3f}, p75 {r[3 * len(r) // 4]:.3f}); "
          f"top-1 agreement on this batch {top1[k]:.2f}")
