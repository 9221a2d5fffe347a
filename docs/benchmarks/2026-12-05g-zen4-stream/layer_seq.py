# TinyLlama-1.1B config int4 decode: one layer's ops in order with their times and the gaps
# between them (zenith.profile events of one decode step, layer 10). python layer_seq.py
import os, collections, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 8
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, "int4")
m.forward = torch.compile(m.forward, backend="zenith")
with torch.no_grad():
    m.generate(ids, **kw)
    with zenith.profile(trace=os.devnull) as p:
        m.generate(ids, **kw)
ev = sorted(p.events, key=lambda e: e[4])
graphs = collections.Counter(e[2] for e in ev); big = max(graphs, key=graphs.get)
per = graphs[big] // (n - 1)
step = [e for e in ev if e[2] == big][per * 3: per * 4]  # the 4th decode step
print(f"{per} ops a step; span {(step[-1][4] + step[-1][5] - step[0][4]) / 1e3:.2f} ms")
layer = len(step) // 22
t0 = step[0][4]
for i, (op, node, graph, tid, ts, dur, shape) in enumerate(step[:layer + 6]):
    gap = ts - (step[i - 1][4] + step[i - 1][5]) if i else 0
    print(f"{op:<14} {str(shape)[:40]:<40} {dur:8.2f} us  gap {gap:6.2f} us")
