# TinyLlama-1.1B config int4 decode: the op times of the decode graph (15 steps after a 16-token prompt) per op kind,
# their span, and the generate wall time. python tinyllama_int4_steps.py
import copy, collections, os, time, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 16
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, "int4")
m.forward = torch.compile(m.forward, backend="zenith")
with torch.no_grad():
    m.generate(ids, **kw)
    with zenith.profile(trace=os.devnull) as p:
        t0 = time.perf_counter(); m.generate(ids, **kw); wall = time.perf_counter() - t0
ev = sorted(p.events, key=lambda e: e[4])
by = collections.defaultdict(lambda: [0, 0.0]); graphs = collections.Counter()
for op, node, graph, tid, ts, dur, shape in ev:
    graphs[graph] += 1
big = max(graphs, key=graphs.get)
dec = [e for e in ev if e[2] == big]
for op, node, graph, tid, ts, dur, shape in dec:
    by[op][0] += 1; by[op][1] += dur / 1e3
span = (dec[-1][4] + dec[-1][5] - dec[0][4]) / 1e3
print(f"wall {wall*1e3:.1f} ms for {n} tokens; graphs {dict(graphs)}; decode graph events {len(dec)}, span {span:.1f} ms, "
      f"op time {sum(t for _, t in by.values()):.1f} ms")
for op, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"  {op:<18} x{c:<6} {t:8.2f} ms  ({t / (n - 1):.3f} a token)")
