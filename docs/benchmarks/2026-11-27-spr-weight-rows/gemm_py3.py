import sys, time, torch
from zenith import _C
from zenith.callpath import _raw
def rate(m, n, k, mode, threads=2, iters=80):
    torch.set_num_threads(threads); _C.set_num_threads(threads)
    g = _C.Graph(); a = g.add_input("a", "f32", [m, k])
    tb = mode.endswith("_t")
    b = g.add_input("b", "f32", [n, k] if tb else [k, n]); B = torch.randn(*( [n,k] if tb else [k,n]))
    if mode.startswith("matmul"):
        out = g.add_node("matmul", [a, b], {"trans_b": tb}); ins=[B]
    else:
        bias = g.add_input("bias", "f32", [n])
        out = g.add_node("addmm", [bias, a, b], {"trans_b": tb}); ins=[B, torch.randn(n)]
    g.set_outputs(out); ex = _C.Executable(g); ex.set_constant_inputs(list(range(1, 1+len(ins))))
    A = torch.randn(m, k)
    f = lambda: ex.run_raw([_raw(A, [])] + [_raw(t, []) for t in ins])[0]
    for _ in range(5): f()
    ts = []
    for _ in range(iters):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    ts.sort(); return 2*m*n*k/ts[len(ts)//2]/1e9
m = int(sys.argv[1]) if len(sys.argv) > 1 else 128
for (n,k) in [(3072,768),(768,3072),(768,768),(2304,768), (1536,384), (384,1536), (384,384)]:
    print(m,n,k, " ".join(f"{md}: {rate(m,n,k,md):.1f}" for md in ("matmul","matmul_t","addmm","addmm_t")))
