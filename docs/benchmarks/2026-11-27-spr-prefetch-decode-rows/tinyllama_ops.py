import sys, time, collections, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.set_num_threads(2); torch.manual_seed(0)
cfg = tinyllama_config()
base = transformers.LlamaForCausalLM(cfg).eval()
m = zenith.quantize(base, "int4").eval()
m.forward = torch.compile(m.forward, backend="zenith")
ids = torch.randint(0, cfg.vocab_size, (1, 16))
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
with torch.no_grad():
    m.generate(ids, max_new_tokens=32, **kw)
    with zenith.profile(trace="/tmp/exp/tl.json") as p:
        m.generate(ids, max_new_tokens=32, **kw)
agg = collections.defaultdict(lambda: [0.0, 0])
ev = sorted([e for e in p.events if e[0] == "qmatmul" and len(e[6]) >= 2 and e[6][-2] == 1], key=lambda e: e[4])
names = ["q", "k", "v", "o", "gate", "up", "down"]
i = 0
for op, node, graph, tid, ts, dur, shape in ev:
    if shape[-1] == 32000: key = "head"; i = 0
    else: key = names[i % 7]; i += 1
    agg[key][0] += dur; agg[key][1] += 1
for k, (d, n) in sorted(agg.items()): print(k, n, f"{d/n:.1f} us")
