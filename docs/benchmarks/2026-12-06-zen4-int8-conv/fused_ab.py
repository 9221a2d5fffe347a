# A/B of a temporary switch read per call (ZB_FUSED set: the old path) on a frozen static-INT8
# ResNet-50: calls alternate old/new in one process, per-pair ratios new/old; the outputs compared.
# python fused_ab.py BATCH [pairs]
import os, sys, time, statistics, torch, torchvision, zenith  # needs fused_switch.diff applied
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 60  # ZENITH_NO_AVX512=1: the AVX2 kernels
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
def run(old):
    if old: os.environ["ZB_FUSED"] = "1"
    else: os.environ.pop("ZB_FUSED", None)
    t = time.perf_counter(); y = f(x); return time.perf_counter() - t, y
with torch.no_grad():
    for _ in range(5): run(False); run(True)
    _, yn = run(False); _, yo = run(True)
    print("max |new - old|", (yn - yo).abs().max().item())
    r = []; tn = []; to = []
    for i in range(pairs):
        if i % 2: a, _ = run(False); o, _ = run(True)
        else: o, _ = run(True); a, _ = run(False)
        r.append(a / o); tn.append(a); to.append(o)
q = statistics.quantiles(r, n=10)
print(f"b{b}: new {statistics.median(tn)*1e3:.2f} ms, old {statistics.median(to)*1e3:.2f} ms, "
      f"new/old {statistics.median(r):.3f} [{q[0]:.3f}, {q[-1]:.3f}] (p10, p90), {pairs} pairs")
