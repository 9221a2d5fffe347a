# Two compiled copies, one compiled with VAR=1 set (a compile-time switch), calls interleaved: ratio = B / A per round.
import os, sys, time, copy, torch, torchvision, zenith, statistics, torch._dynamo
torch.manual_seed(0); torch.set_num_threads(2)
name, B, var = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rounds = int(os.environ.get("ROUNDS", 60 if B == 1 else 20))
m = getattr(torchvision.models, name)().eval(); x = torch.randn(B, 3, 224, 224)
with torch.no_grad():
    ref = m(x)
    os.environ.pop(var, None); ca = zenith.compile(m); ca(x)
    os.environ[var] = "1"; cb = zenith.compile(copy.deepcopy(m)); cb(x); os.environ.pop(var, None)
    for f in (ca, cb): f(x); f(x)
    ta, tb = [], []
    for r in range(rounds):
        for f, t in ((ca, ta), (cb, tb)) if r % 2 == 0 else ((cb, tb), (ca, ta)):
            t0 = time.perf_counter(); out = f(x); t.append(time.perf_counter() - t0)
            assert torch.allclose(out, ref, rtol=1e-3, atol=1e-5 * ref.abs().max().item())
r = sorted(b / a for a, b in zip(ta, tb))
print(f"{name} b{B}: default {statistics.median(ta)*1e3:.2f} ms, {var}=1 {statistics.median(tb)*1e3:.2f} ms, ratio {statistics.median(r):.3f} [p25 {r[len(r)//4]:.3f}, p75 {r[3*len(r)//4]:.3f}]")
