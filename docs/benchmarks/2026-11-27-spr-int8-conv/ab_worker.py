"""One process of the build A/B: fp32 ResNet-50 and MobileNet V2 (b1, b8) and int8-static
ResNet-50 (b1, b8) compiled with whichever zenith is first on the path; prints one JSON
line of median ms per workload (7 timed calls after 2 warm-ups)."""
import copy, json, statistics as st, sys, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
out = {"zenith": zenith.__file__}
def timed(f, x, n=7):
    with torch.no_grad():
        for _ in range(2): f(x)
        ts = []
        for _ in range(n):
            t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
    return st.median(ts) * 1e3
for name in ("resnet50", "mobilenet_v2"):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)().eval()
    f = torch.compile(m, backend="zenith")
    for b in (1, 8):
        torch.manual_seed(1)
        out[f"{name} fp32 b{b}"] = timed(f, torch.randn(b, 3, 224, 224))
    torch._dynamo.reset()
    if name == "resnet50":
        torch.manual_seed(2)
        cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
        q = torch.compile(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal), backend="zenith")
        for b in (1, 8):
            torch.manual_seed(1)
            out[f"{name} int8-static b{b}"] = timed(q, torch.randn(b, 3, 224, 224))
        torch._dynamo.reset()
print(json.dumps(out))
