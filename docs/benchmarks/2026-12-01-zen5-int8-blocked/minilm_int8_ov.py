# MiniLM (random init, all-MiniLM-L6-v2 config) fp32 and int8-dynamic, each compiled (torch.compile) and frozen, 40 paired rounds: python minilm_int8_ov.py [seq]
import os, sys, copy, time, torch, zenith, statistics
from transformers import BertConfig, BertModel
torch.manual_seed(0); torch.set_num_threads(2)
S = int(sys.argv[1]) if len(sys.argv) > 1 else 128
cfg = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = BertModel(cfg).eval()
ids = torch.randint(0, 30000, (1, S)); mask = torch.ones(1, S, dtype=torch.long)
q = zenith.quantize(copy.deepcopy(m), "int8-dynamic")
v = {"fp32-compiled": torch.compile(m, backend="zenith"), "fp32-frozen": zenith.freeze(m),
     "int8-compiled": torch.compile(q, backend="zenith"), "int8-frozen": zenith.freeze(q)}
ts = {k: [] for k in v}
with torch.no_grad():
    for k, f in v.items():
        for _ in range(3): f(ids, attention_mask=mask)
    names = list(v)
    for r in range(40):
        for k in names[r % 4:] + names[:r % 4]:
            t = time.perf_counter(); v[k](ids, attention_mask=mask); ts[k].append(time.perf_counter() - t)
for k in names:
    print(f"minilm s{S} {k:<14} {statistics.median(ts[k])*1e3:7.3f} ms")
print("int8/fp32 compiled", statistics.median(ts["int8-compiled"]) / statistics.median(ts["fp32-compiled"]),
      "frozen", statistics.median(ts["int8-frozen"]) / statistics.median(ts["fp32-frozen"]))
