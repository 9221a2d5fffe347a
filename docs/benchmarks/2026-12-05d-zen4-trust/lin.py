# Per-shape GEMM rate of x @ W^T + b (addmm, the weight-rows driver) with W cold: 16 weights
# in turn, past L3. python lin.py M N K [gelu]
import sys, time, statistics, torch, zenith
torch.set_num_threads(2); torch.manual_seed(0)
M, N, K = map(int, sys.argv[1:4]); gelu = len(sys.argv) > 4
class Many(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.l = torch.nn.ModuleList(torch.nn.Linear(K, N) for _ in range(16))
    def forward(s, x):
        return tuple(torch.nn.functional.gelu(l(x)) if gelu else l(x) for l in s.l)
m = Many().eval(); x = torch.randn(M, K)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(x)
    ts = []
    for _ in range(60):
        t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
t = statistics.median(ts) / 16
print(f"{M}x{N}x{K}{' +gelu' if gelu else ''}: {t*1e6:.1f} us, {2*M*N*K/t/1e9:.1f} GFLOP/s")
