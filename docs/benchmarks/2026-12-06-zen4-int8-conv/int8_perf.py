# (as 2026-12-05c-zen4/int8_perf.py, printing "start" once the calls begin, for `perf record -p`)
# Calls of a frozen static-INT8 ResNet-50 (random init, calibrated on 4 random batches of 2) for 12 s, for
# `perf record` over a profiling build (`make install-profiling`): python int8_perf.py BATCH
import torch, torchvision, zenith, time, sys
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(x)
    print("start", flush=True); t = time.perf_counter(); n = 0
    while time.perf_counter() - t < 12: f(x); n += 1
print((time.perf_counter() - t) / n * 1e3, "ms a call")
