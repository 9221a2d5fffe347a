# A/B of a switch read at call time (an environment variable), calls interleaved in one process:
# python ab_call_env.py <model> <batch> VAR [val1 val2 ...] ("-" unset; default "-" and "1"). The switches this
# session compared (XNOVL, XVLK: the wide tile's use) were temporary, read in pick_tile, not in the tree.
import os, sys, time, torch, torchvision, zenith, statistics
torch.manual_seed(0); torch.set_num_threads(2)
name, B, var = sys.argv[1], int(sys.argv[2]), sys.argv[3]
vals = sys.argv[4:] or ["-", "1"]
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
c = torch.compile(m, backend="zenith")
ts = {v: [] for v in vals}
with torch.no_grad():
    ref = m(x)
    for _ in range(3): c(x)
    for r in range(60 if B == 1 else 16):
        for k in vals:
            if k != "-": os.environ[var] = k
            else: os.environ.pop(var, None)
            t = time.perf_counter(); out = c(x); ts[k].append(time.perf_counter() - t)
            assert torch.allclose(out, ref, rtol=1e-3, atol=1e-5 * ref.abs().max().item())
for k, v in ts.items():
    s = sorted(v); print(f"{name} b{B} {var} {k:<8} median {statistics.median(s)*1e3:8.3f} ms  p10 {s[len(s)//10]*1e3:8.3f}")
