import sys, os, torch, zenith, time, statistics
from transformers import BertConfig, BertModel
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1]; rounds = int(sys.argv[2]); var = sys.argv[3]
if name == "bert": cfg = BertConfig()
else: cfg = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = BertModel(cfg).eval()
ids = torch.randint(0, 30000, (1, 128)); mask = torch.ones(1, 128, dtype=torch.long)
c = torch.compile(m, backend="zenith")
ratios = []; tn = []; to = []
with torch.no_grad():
    ref = m(ids, attention_mask=mask).last_hidden_state
    for v in ("", "1"):
        if v: os.environ[var] = v
        else: os.environ.pop(var, None)
        for _ in range(3): y = c(ids, attention_mask=mask).last_hidden_state
        print(var, v or "-", "max err", (y - ref).abs().max().item())
    n = 5 if name == "bert" else 15
    for r in range(rounds):
        t = {}
        for v in (("", "1") if r % 2 == 0 else ("1", "")):
            if v: os.environ[var] = v
            else: os.environ.pop(var, None)
            ts = []
            for _ in range(n):
                t0 = time.perf_counter(); c(ids, attention_mask=mask); ts.append(time.perf_counter() - t0)
            t[v] = statistics.median(ts)
        ratios.append(t[""] / t["1"]); tn.append(t[""]); to.append(t["1"])
q = statistics.quantiles(ratios, n=4)
print(f"{name}: new/old median {statistics.median(ratios):.3f} (p25 {q[0]:.3f}, p75 {q[2]:.3f}); new {statistics.median(tn)*1e3:.2f} ms, old {statistics.median(to)*1e3:.2f} ms")
