# perf driver: python prof_r50.py BATCH [int8|fp32] SECONDS (int8: int8-static, 4 noise batches of calibration);
# `perf record -F 1999` after `make install-profiling`, then `perf report --time 45%-95% --no-children --sort sym`.
import sys, copy, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); scheme = sys.argv[2]
m = torchvision.models.resnet50().eval()
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
q = zenith.freeze(copy.deepcopy(m) if scheme == "fp32" else zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal))
x = torch.randn(B, 3, 224, 224)
with torch.no_grad():
    for _ in range(3): q(x)
    t = time.perf_counter(); n = 0
    while time.perf_counter() - t < float(sys.argv[3]): q(x); n += 1
print(f"{n} calls, {1e3 * (time.perf_counter() - t) / n:.2f} ms each", file=sys.stderr)
