# NaN counts after each layer of a small quantized stem model, eager against compiled (run with
# ZENITH_NO_AVX512=1 so the 3x3 conv stays float32 and runs by Winograd).
import torch, zenith, copy, sys
sys.path.insert(0, "/work/main/tests/python/quant")
torch.manual_seed(0)
m = torch.nn.Sequential(
    torch.nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
    torch.nn.MaxPool2d(3, 2, 1), torch.nn.Conv2d(64, 64, 1), torch.nn.ReLU(),
    torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU()).eval()
g = torch.Generator().manual_seed(5)
cal = [torch.randn(2, 3, 64, 64, generator=g) for _ in range(2)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
x = torch.randn(2, 3, 64, 64); x[1, 2, 10, 10] = float("nan")
for k in range(1, len(q) + 1):
    sub = q[:k]
    with torch.no_grad():
        want, got = sub(x), torch.compile(sub, backend="zenith")(x)
    print(k, type(q[k-1]).__name__, "nan eager", int(want.isnan().sum()), "compiled", int(got.isnan().sum()))
