import sys, time, torch
from zenith import _C
from zenith.callpath import _raw
torch.set_num_threads(2); _C.set_num_threads(2)
L = int(sys.argv[1]); m = 128; tb = sys.argv[2] == "t"
g = _C.Graph(); x = g.add_input("x", "f32", [m, 768]); ws = []; ins = []
h = x
for i in range(L):
    for (k, n) in ((768, 3072), (3072, 768)):
        w = g.add_input(f"w{i}{n}", "f32", [n, k] if tb else [k, n]); ins.append(torch.randn(*([n, k] if tb else [k, n])) * 0.02)
        h = g.add_node("matmul", [h, w], {"trans_b": tb})[0]
g.set_outputs([h]); ex = _C.Executable(g); ex.set_constant_inputs(list(range(1, 1 + len(ins))))
X = torch.randn(m, 768)
f = lambda: ex.run_raw([_raw(X, [])] + [_raw(t, []) for t in ins])[0]
for _ in range(3): f()
ts = []
for _ in range(20):
    t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
ts.sort(); print(f"L={L} tb={tb}: {2*m*768*3072*2*L/ts[10]/1e9:.1f} GF/s")
