# Frozen MobileNet V2 b1, 2 threads: a call after 50 ms in which both cores spin on registers (the calling thread,
# and a pinned spinner process stopped with SIGSTOP just before the call), against back to back and after idle.
import os, signal, subprocess, time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
me = os.sched_getaffinity(0); other = sorted(me)[1]
spin = subprocess.Popen(["taskset", "-c", str(other), "python3", "-c", "while True: pass"])
os.kill(spin.pid, signal.SIGSTOP)
res = {"back-to-back": [], "after 50 ms idle": [], "after 50 ms both cores spinning": []}
def spin_both(sec):
    os.kill(spin.pid, signal.SIGCONT)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < sec: pass
    os.kill(spin.pid, signal.SIGSTOP)
with torch.no_grad():
    for _ in range(5): f(x)
    for _ in range(60):
        f(x); s = time.perf_counter(); f(x); res["back-to-back"].append(time.perf_counter() - s)
        time.sleep(0.05); s = time.perf_counter(); f(x); res["after 50 ms idle"].append(time.perf_counter() - s)
        spin_both(0.05); s = time.perf_counter(); f(x); res["after 50 ms both cores spinning"].append(time.perf_counter() - s)
spin.kill()
for k, v in res.items(): print(f"{k}: median {statistics.median(v) * 1e3:.3f} ms, p10 {sorted(v)[6] * 1e3:.3f}")
