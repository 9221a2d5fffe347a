# One thread's x @ W^T while the other core (a) idles, (b) runs a register-only FMA loop, (c) runs its own copy of the GEMM.
import random, statistics, sys, threading, time, torch, zenith, zenith._C as C
torch.manual_seed(0); torch.set_num_threads(1)
M, N, K = map(int, sys.argv[1].split("x"))
def mk(): return [zenith.freeze(torch.nn.Linear(K, N).eval()) for _ in range(4)], torch.randn(M, K)
A, B = mk(), mk()
def fma(): return next(r["gmacs"] for r in C.isa_mac_rates() if r["name"] == "fp32 fma (avx512)")
def timed(job, n=24):
    fs, x = job; ts = []
    for i in range(n):
        t = time.perf_counter_ns(); fs[i % 4](x); ts.append(time.perf_counter_ns() - t)
    return statistics.median(ts) / 1e3
stop = False
def bg(mode):
    while not stop:
        if mode == "fma": fma()
        elif mode == "gemm": timed(B, 4)
with torch.no_grad():
    timed(A); timed(B)
    res = {}
    for r in range(8):
        for mode in random.sample(["idle", "fma", "gemm"], 3):
            stop = False
            th = threading.Thread(target=bg, args=(mode,)) if mode != "idle" else None
            if th: th.start(); time.sleep(0.02)
            us = timed(A)
            stop = True
            if th: th.join()
            pk = fma()
            res.setdefault(mode, []).append(M * N * K / us / 1e3 / pk)
for m, v in res.items(): print(f"{M}x{N}x{K} other core {m}: {statistics.median(v)*100:.1f}% of a core's FMA [{min(v)*100:.1f}, {max(v)*100:.1f}]")
