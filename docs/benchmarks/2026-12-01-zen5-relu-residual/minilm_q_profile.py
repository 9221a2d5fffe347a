# Per-op times of all-MiniLM-L6-v2 config (random init) at seq 128 on Zenith: python minilm_q_profile.py <scheme|fp32>
import sys, os, collections, copy, torch, zenith
from transformers import BertConfig, BertModel
torch.manual_seed(0); torch.set_num_threads(2)
cfg = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = BertModel(cfg).eval(); ids = torch.randint(0, 30000, (1, 128)); mask = torch.ones(1, 128, dtype=torch.long)
if sys.argv[1] != "fp32": m = zenith.quantize(copy.deepcopy(m), sys.argv[1])
c = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): c(ids, attention_mask=mask)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(20): c(ids, attention_mask=mask)
agg = collections.defaultdict(list)
for op, node, graph, tid, ts, dur, shape in p.events: agg[(op, tuple(shape))].append(dur)
tot = sum(sum(d) for d in agg.values()) / 20 / 1e3
for (op, shape), d in sorted(agg.items(), key=lambda kv: -sum(kv[1]))[:12]:
    print(f"{op:14s} {str(shape):20s} n/call={len(d)//20:3d} per call {sum(d)/20/1e3:6.3f} ms  {100*sum(d)/20/1e3/tot:5.1f}%")
print(f"total {tot:.3f} ms")
