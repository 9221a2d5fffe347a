# In-model GEMM rates (zenith.profile trace, kernel time) against 2 x one core's FMA rate, per round.
import statistics, sys, torch, zenith, zenith._C as C
from zenith.bench import workloads
torch.manual_seed(0); torch.set_num_threads(2)
name, seq = sys.argv[1], int(sys.argv[2])
import transformers
cfg = {"bert": transformers.BertConfig(), "minilm": transformers.BertConfig(hidden_size=384, num_hidden_layers=6,
       num_attention_heads=12, intermediate_size=1536)}[name]
m = transformers.BertModel(cfg).eval(); ids = torch.randint(0, 1000, (1, seq))
f = zenith.freeze(m)
with torch.no_grad():
    ref = m(ids).last_hidden_state; out = f(ids)
    out = out["last_hidden_state"] if isinstance(out, dict) else out[0]
    print("max abs diff", (out - ref).abs().max().item())
def fma():
    return next(r["gmacs"] for r in C.isa_mac_rates() if r["name"] == "fp32 fma (avx512)")
res = {}
with torch.no_grad():
    for r in range(int(sys.argv[3]) if len(sys.argv) > 3 else 12):
        p0 = fma()
        with zenith.profile(trace="/dev/null") as p:
            for _ in range(3): f(ids)
        p1 = fma(); peak = 4 * (p0 + p1) / 2
        for row in p.gemm_rates(3):
            k = (row["op"], row["m"], row["n"], row["k"])
            res.setdefault(k, []).append((row["gflops"], row["gflops"] / peak, row["total_us"]))
for k, v in res.items():
    sh = sorted(x[1] for x in v)
    print(k, f"{statistics.median(x[0] for x in v):.0f} GFLOP/s share {statistics.median(sh)*100:.1f}% [{sh[1]*100:.1f},{sh[-2]*100:.1f}] "
          f"total {statistics.median(x[2] for x in v):.0f} us/call")
