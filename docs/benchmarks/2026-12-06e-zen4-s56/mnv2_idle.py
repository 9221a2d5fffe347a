# Frozen MobileNet V2 b1 (random init), 2 threads: a call timed right after another call, against one timed after
# 50 ms idle (as the bench's rounds start each contestant's call once the previous one's threads are quiet).
import time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
res = {"back-to-back": [], "after 50 ms idle": []}
with torch.no_grad():
    for _ in range(5): f(x)
    for _ in range(60):
        f(x); s = time.perf_counter(); f(x); res["back-to-back"].append(time.perf_counter() - s)
        time.sleep(0.05); s = time.perf_counter(); f(x); res["after 50 ms idle"].append(time.perf_counter() - s)
for k, v in res.items(): print(f"{k}: median {statistics.median(v) * 1e3:.3f} ms, p10 {sorted(v)[6] * 1e3:.3f}")
