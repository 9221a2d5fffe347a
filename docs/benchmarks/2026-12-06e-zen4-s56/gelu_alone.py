# GELU alone: Zenith's frozen nn.GELU (zenith.profile's kernel time) against torch's, per value. python gelu_alone.py THREADS
import sys, time, torch, zenith
torch.set_num_threads(int(sys.argv[1]))
x = torch.randn(128, 1536) * 2
g = torch.nn.GELU()
f = zenith.freeze(torch.nn.Sequential(torch.nn.Identity(), g).eval())
with torch.no_grad():
    y = f(x); print("max abs diff", (y - g(x)).abs().max().item())
    for _ in range(50): f(x)
    with zenith.profile(trace="/dev/null") as p:
        for _ in range(400): f(x)
    tt = []
    for _ in range(400):
        t = time.perf_counter(); g(x); tt.append(time.perf_counter() - t)
print(p)
tt.sort(); print(f"torch median {tt[200]*1e6:.1f} us = {tt[200]*1e9/x.numel():.3f} ns/value")
