# One x @ W^T + b alone, frozen by Zenith (zenith.profile's kernel time, warm), at all-MiniLM-L6-v2's shapes:
# how far a small fp32 GEMM's call sits from the sgemm peak without the model around it.
# python linear_alone.py   (ZENITH_NO_AVX512=1 for the AVX2 tile)
import statistics, torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
for n, k in ((384, 384), (1152, 384), (1536, 384), (384, 1536)):
    lin = torch.nn.Linear(k, n).eval(); x = torch.randn(128, k)
    f = zenith.freeze(lin)
    with torch.no_grad():
        for _ in range(50): f(x)
        with zenith.profile(trace="/dev/null") as p:
            for _ in range(200): f(x)
    r = [g for g in p.gemm_rates(200) if g["op"] in ("addmm", "matmul")][0]
    print(f"128 x {n} x {k}: median {r['median_us']:.1f} us, {r['gflops']:.0f} GFLOP/s")
