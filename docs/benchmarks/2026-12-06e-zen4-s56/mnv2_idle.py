# Frozen MobileNet V2 b1 (random init), 2 threads: a call timed right after another call, against one timed after
# 50 ms in which the calling thread sleeps (as the bench's rounds start each contestant's call once the previous
# one's threads are quiet) or, with `spin`, spins: python mnv2_idle.py [spin]
import sys, time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
spin = sys.argv[1:] == ["spin"]
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)


def wait(sec):
    if not spin:
        return time.sleep(sec)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < sec: pass


after = "after 50 ms of one thread spinning" if spin else "after 50 ms idle"
res = {"back-to-back": [], after: []}
with torch.no_grad():
    for _ in range(5): f(x)
    for _ in range(60):
        f(x); s = time.perf_counter(); f(x); res["back-to-back"].append(time.perf_counter() - s)
        wait(0.05); s = time.perf_counter(); f(x); res[after].append(time.perf_counter() - s)
for k, v in res.items(): print(f"{k}: median {statistics.median(v) * 1e3:.3f} ms, p10 {sorted(v)[6] * 1e3:.3f}")
