# One sdpa alone, frozen by Zenith, against eager torch (same inputs, calls alternated): B 1, H heads, L = S tokens,
# head dim E.  python sdpa_alone.py [H L E rounds]
import sys, time, statistics, random, torch, zenith
import torch.nn.functional as F
torch.manual_seed(0); torch.set_num_threads(2)
H, L, E = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (12, 128, 32)
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 200
class A(torch.nn.Module):
    def forward(self, q, k, v): return F.scaled_dot_product_attention(q, k, v)
q, k, v = (torch.randn(1, H, L, E) for _ in range(3))
m = A().eval(); f = zenith.freeze(m)
with torch.no_grad():
    print("max diff vs eager", (f(q, k, v) - m(q, k, v)).abs().max().item())
    t = {"zenith": [], "eager": []}
    fn = {"zenith": lambda: f(q, k, v), "eager": lambda: m(q, k, v)}
    for _ in range(20): f(q, k, v); m(q, k, v)
    for _ in range(rounds):
        for n in random.sample(list(fn), 2):
            s = time.perf_counter(); fn[n](); t[n].append(time.perf_counter() - s)
fl = 4 * H * L * L * E
for n in t:
    md = statistics.median(t[n]); print(f"{n}: {md*1e6:.1f} us, {fl / md / 1e9:.1f} GFLOP/s (2 products)")
