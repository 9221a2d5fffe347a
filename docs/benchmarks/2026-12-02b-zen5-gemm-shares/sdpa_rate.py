# sdpa alone at all-MiniLM-L6-v2's shapes through the Python binding (run_raw), 2 threads: median us and GFLOP/s
# (4 B H L^2 E flops). python sdpa_rate.py [L] [calls]
import sys, time, torch
from zenith import _C
from zenith.callpath import _raw
torch.set_num_threads(2); _C.set_num_threads(2)
B, H, L, E = 1, 12, int(sys.argv[1]) if len(sys.argv) > 1 else 128, 32
g = _C.Graph()
q = g.add_input("q", "f32", [B, H, L, E]); k = g.add_input("k", "f32", [B, H, L, E]); v = g.add_input("v", "f32", [B, H, L, E])
m = g.add_input("m", "f32", [B, 1, L, L])
g.set_outputs(g.add_node("sdpa", [q, k, v, m], {"has_mask": 1}))
exe = _C.Executable(g)
Q, K, V = (torch.randn(B, H, L, E) for _ in range(3)); M = torch.zeros(B, 1, L, L)
f = lambda: exe.run_raw([_raw(Q, []), _raw(K, []), _raw(V, []), _raw(M, [])])[0]
ref = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
out = f()
print("max err", (torch.as_tensor(out) - ref).abs().max().item() if not isinstance(out, tuple) else "")
ts = []
for r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 2000):
    t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
ts.sort(); med = ts[len(ts) // 2]
fl = 4 * B * H * L * L * E
print(f"sdpa B{B} H{H} L{L} E{E}: median {med*1e6:.1f} us, {fl/med/1e9:.1f} GFLOP/s")
