import sys, torch, zenith
from transformers import BertConfig, BertModel
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1]
cfg = BertConfig() if name == "bert" else BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
seq = int(sys.argv[2]) if len(sys.argv) > 2 else 128
m = BertModel(cfg).eval()
ids = torch.randint(0, 30000, (1, seq)); mask = torch.ones(1, seq, dtype=torch.long)
c = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): c(ids, attention_mask=mask)
    with zenith.profile() as p:
        for _ in range(10): c(ids, attention_mask=mask)
print(p)
import collections
with torch.no_grad():
    with zenith.profile(trace="/tmp/gb/t.json") as p:
        for _ in range(10): c(ids, attention_mask=mask)
agg = collections.defaultdict(list)
for op, node, graph, tid, ts, dur, shape in p.events:
    agg[(op, tuple(shape))].append(dur)
for (op, shape), d in sorted(agg.items(), key=lambda kv: -sum(kv[1])):
    d = sorted(d); med = d[len(d)//2]
    extra = ""
    if op == "addmm" and len(shape) == 2:
        K = {768: None}.get(0)
    print(f"{op:10s} {str(shape):18s} n={len(d):4d} median {med:8.1f} us total/call {sum(d)/10/1e3:7.2f} ms")
print("---")
byn = collections.defaultdict(list)
for op, node, graph, tid, ts, dur, shape in p.events:
    if op == "addmm": byn[node].append(dur)
for n, d in list(byn.items())[:14]:
    d = sorted(d); print(n, d[len(d)//2])
