import torch, time, statistics, zenith._C as C
torch.set_num_threads(1)
def fma(): return next(r["gmacs"] for r in C.isa_mac_rates() if r["name"] == "fp32 fma (avx512)")
for (m, n, k) in [(12, 32, 256), (12, 128, 256), (48, 128, 768), (8, 32, 256)]:
    A, B = torch.randn(m, k), torch.randn(k, n)
    for name in ["f32_gemm_12x32__avx512_rows", "f32_gemm_8x32__avx512", "f32_gemm_8x32__avx512_rows"]:
        case, Cc = C.GemmUkernelCase(name, A, B), torch.empty(m, n)
        ts = []
        for _ in range(2000):
            t = time.perf_counter_ns(); case.run(Cc); ts.append(time.perf_counter_ns() - t)
        pk = fma()
        print(m, n, k, name, f"{2*m*n*k/min(ts):.1f} GFLOP/s, 1-core peak {2*pk:.1f}: {m*n*k/min(ts)/pk*100:.1f}%")
