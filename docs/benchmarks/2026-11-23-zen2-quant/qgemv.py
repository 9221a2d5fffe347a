"""qmatmul GEMV (one row of x) on tensors of the Gemma 3 270M Q4_K_M GGUF file against
torch.mm in float32 on the same weights dequantized: median time of many calls, 2 threads,
"hot" (one weight called again and again: it stays in cache) and "cold" (calls cycle
through copies that together exceed the 16 MiB L3, as a decode step meets its weights).
GB/s counts the weight bytes each call reads. _C.qmatmul's time includes its binding
(~13 us a call: DLPack import of x and w, the output tensor); qgemv.cc times the kernel
alone. Run: python qgemv.py (from a venv with zenith and gguf installed)."""
import os, statistics, time
import numpy as np, torch, gguf
from zenith import _C
torch.set_num_threads(2); _C.set_num_threads(2)
r = gguf.GGUFReader(os.path.expanduser('~/.cache/zenith-bench/gemma3-270m-gguf/gemma-3-270m-q4_k_m.gguf'))
T = {t.name: t for t in r.tensors}
cases = [("token_embd.weight", "q8_0", 30), ("blk.0.ffn_up.weight", "q5_0", 1000), ("blk.0.ffn_down.weight", "q6_k", 1000),
         ("blk.0.attn_output.weight", "q4_k", 1000)]
def med(fns, reps):
    for i in range(3): fns[i % len(fns)]()
    ts = []
    for i in range(reps):
        f = fns[i % len(fns)]
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
for name, fmt, reps in cases:
    w = torch.from_numpy(np.array(T[name].data))  # a copy in anonymous memory
    N, rb = w.shape
    wd = _C.qdequantize(w, fmt)
    K = wd.shape[1]
    x = torch.randn(1, K)
    copies = max(1, (96 << 20) // (wd.numel() * 4))
    ws = [w.clone() for _ in range(copies)] if copies > 1 else [w]
    wds = [wd.clone() for _ in range(copies)] if copies > 1 else [wd]
    out = {}
    for label, fns_q, fns_f in [("hot", [lambda: _C.qmatmul(x, w, fmt)], [lambda: torch.mm(x, wd.T)]),
                                ("cold", [lambda w=w_: _C.qmatmul(x, w, fmt) for w_ in ws], [lambda wd=d: torch.mm(x, wd.T) for d in wds])]:
        if label == "hot" and copies == 1: continue
        tq, tf = med(fns_q, reps), med(fns_f, reps)
        print(f"{fmt} {N}x{K} ({label:4s}): qmatmul {tq*1e6:8.1f} us = {w.numel()/tq/1e9:5.1f} GB/s of {w.numel()/1e6:.2f} MB | "
              f"torch.mm fp32 {tf*1e6:8.1f} us = {wd.numel()*4/tf/1e9:5.1f} GB/s of {wd.numel()*4/1e6:.1f} MB | {tf/tq:4.2f}x")
