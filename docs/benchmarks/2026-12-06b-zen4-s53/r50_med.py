import statistics, sys, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]); scheme = sys.argv[2]
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
if scheme != "fp32":
    zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(x)
    ts = []
    for _ in range(40 if b == 1 else 8):
        t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
print(f"{zenith.__file__.split('/')[2]} b{b} {scheme}: median {statistics.median(ts)*1e3:.2f} ms")
