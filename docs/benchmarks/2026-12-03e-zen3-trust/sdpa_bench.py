import sys, time, statistics, torch, zenith
import torch.nn.functional as F
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
for E, H in ((int(sys.argv[2]), 12),) if len(sys.argv) > 2 else ((32, 12), (64, 12)):
    q, k, v = (torch.randn(1, H, 128, E) for _ in range(3))
    f = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), backend="zenith")
    with torch.no_grad():
        ref = F.scaled_dot_product_attention(q, k, v)
        out = f(q, k, v)
        assert torch.allclose(out, ref, atol=1e-5), (out - ref).abs().max()
        ts = {}
        for name, fn in (("eager", F.scaled_dot_product_attention), ("zenith", f)):
            for _ in range(20): fn(q, k, v)
            t = []
            for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 200):
                t0 = time.perf_counter(); fn(q, k, v); t.append(time.perf_counter() - t0)
            ts[name] = statistics.median(t)
    fl = 4 * H * 128 * 128 * E
    print(f"E={E} H={H}: " + ", ".join(f"{k} {1e6*t:.0f} us ({fl/t/1e9:.1f} GFLOP/s)" for k, t in ts.items()))
