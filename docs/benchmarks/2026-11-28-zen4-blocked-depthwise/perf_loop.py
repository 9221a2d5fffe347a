# A loop of compiled MobileNet V2 b1 calls for perf: perf record -D 6000 -F 4999 -- python perf_loop.py
import time, torch, torchvision, zenith
torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(20): c(x)
    t = time.perf_counter()
    for _ in range(4000): c(x)
    print((time.perf_counter() - t) / 4000 * 1e3, "ms")
