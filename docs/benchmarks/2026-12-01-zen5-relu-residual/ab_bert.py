# Paired A/B of call-time env settings on BERT-base / MiniLM (random init, seq S, zenith.freeze):
# python ab_bert.py <bert|minilm> <seq> SPEC...; SPEC "-" (none) or "A=1,B=2".
import os, sys, time, torch, zenith, statistics
from transformers import BertConfig, BertModel
torch.manual_seed(0); torch.set_num_threads(2)
name, S = sys.argv[1], int(sys.argv[2]); specs = sys.argv[3:]
rounds = int(os.environ.get("ROUNDS", 30))
cfg = BertConfig() if name == "bert" else BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = BertModel(cfg).eval()
ids = torch.randint(0, 30000, (1, S)); mask = torch.ones(1, S, dtype=torch.long)
c = zenith.freeze(m)
keys = sorted({kv.split("=")[0] for s in specs if s != "-" for kv in s.split(",")})
def setv(s):
    for k in keys: os.environ.pop(k, None)
    if s != "-":
        for kv in s.split(","): k, v = kv.split("="); os.environ[k] = v
ts = {s: [] for s in specs}
with torch.no_grad():
    ref = m(ids, attention_mask=mask).last_hidden_state
    for s in specs: setv(s); c(ids, attention_mask=mask); c(ids, attention_mask=mask)
    for r in range(rounds):
        for s in specs[r % len(specs):] + specs[:r % len(specs)]:
            setv(s); t = time.perf_counter(); out = c(ids, attention_mask=mask).last_hidden_state; ts[s].append(time.perf_counter() - t)
            assert torch.allclose(out, ref, rtol=1e-3, atol=1e-4)
base = ts[specs[0]]
for s, v in ts.items():
    r = sorted(b / a for a, b in zip(base, v))
    print(f"{name} s{S} {s:<22} median {statistics.median(v)*1e3:8.3f} ms  ratio {statistics.median(r):.3f} [p25 {r[len(r)//4]:.3f}, p75 {r[3*len(r)//4]:.3f}]")
