# One linear layer 384 -> 1536 at 128 rows, with no activation, GELU or ReLU after it, fp32 and
# int8, through torch.compile(backend="zenith"); median of 300 calls. Run it alternately against two
# builds (PYTHONPATH=<other build's package>) for before/after: the GELU share is gelu - none.
import copy, statistics, time, torch, zenith
torch.set_num_threads(2)
torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(s, act): super().__init__(); s.l = torch.nn.Linear(384, 1536); s.act = act
    def forward(s, x): return s.act(s.l(x))
x = torch.randn(128, 384)
for scheme in ["fp32", "int8"]:
    res = {}
    for name, act in [("none", torch.nn.Identity()), ("gelu", torch.nn.GELU()), ("relu", torch.nn.ReLU())]:
        m = M(act).eval()
        if scheme != "fp32": m = zenith.quantize(m, scheme)
        c = torch.compile(m, backend="zenith")
        with torch.no_grad():
            for _ in range(20): c(x)
            ts = []
            for _ in range(300):
                t0 = time.perf_counter(); c(x); ts.append(time.perf_counter() - t0)
        res[name] = statistics.median(ts) * 1e6
        torch._dynamo.reset()
    print(zenith.__file__[:20], scheme, " ".join(f"{k} {v:.1f}us" for k, v in res.items()))
