"""ResNet-50 (random init) fp32 and int8-static variants compiled with Zenith in one process, calls interleaved;
per-round ratios to fp32's time. python q_variants.py BATCH ROUNDS"""
import sys, copy, statistics as st, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.resnet50().eval()
b, rounds = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(b, 3, 224, 224),) for _ in range(4)]
variants = {
    "stage 1 fp32 edge": dict(exclude=["layer1.*"]),
    "int8-static": dict(),
    "stage 1 fp32": dict(exclude=["layer1.*"]),
}
fns = {"fp32": torch.compile(m, backend="zenith")}
import os
for k, kw in variants.items():
    if "edge" in k: os.environ["ZX_INT8EDGE"] = "1"
    fns[k] = torch.compile(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, **kw), backend="zenith")
    with torch.no_grad(): fns[k](x)
    os.environ.pop("ZX_INT8EDGE", None)
ts = {k: [] for k in fns}
with torch.no_grad():
    ref = m(x)
    for _ in range(2):
        for f in fns.values(): f(x)
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            t = time.perf_counter(); fns[k](x); ts[k].append(time.perf_counter() - t)
    top = {k: (fns[k](x).argmax(-1) == ref.argmax(-1)).float().mean().item() for k in fns}
for k in fns:
    r = sorted(a / f for a, f in zip(ts[k], ts["fp32"]))
    print(f"resnet50 b{b} {k:<16} {st.median(ts[k])*1e3:8.2f} ms  ratio {st.median(r):.3f} [p25 {r[len(r)//4]:.3f}, p75 {r[3*len(r)//4]:.3f}]  top-1 {top[k]:.2f}")
