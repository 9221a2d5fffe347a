# int8 linear layers at 8..128 rows (M x K x N), median of 200 calls; alternate two builds as above.
import statistics, time, torch, zenith
torch.set_num_threads(2); torch.manual_seed(0)
out = []
for (M, K, N) in [(8, 768, 768), (16, 768, 768), (32, 768, 3072), (128, 3072, 768)]:
    m = zenith.quantize(torch.nn.Sequential(torch.nn.Linear(K, N)).eval(), "int8")
    c = torch.compile(m, backend="zenith"); x = torch.randn(M, K)
    with torch.no_grad():
        for _ in range(10): c(x)
        ts = []
        for _ in range(200):
            t0 = time.perf_counter(); c(x); ts.append(time.perf_counter() - t0)
    out.append(f"{M}x{K}x{N} {statistics.median(ts)*1e6:.0f}us")
    torch._dynamo.reset()
print(zenith.__file__[:12], " ".join(out))
