# TinyLlama-1.1B config decode, one scheme: where a token's wall time goes. The bench's rate ((t_n - t_1) / (n - 1)
# over medians of interleaved generate calls), then one profiled generate: per decode step the span of the decode
# graph's op events and the sum of its ops' own times; the wall per token minus the span is the time outside the
# graph (generate's loop, Dynamo's guards, the call path).
# python decode_overhead.py [fp32|int8|int4] [tokens] [rounds]
import copy, collections, os, statistics, sys, time, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
scheme = sys.argv[1] if len(sys.argv) > 1 else "int4"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16))
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
m = base if scheme == "fp32" else zenith.quantize(base, scheme)
m.forward = torch.compile(m.forward, backend="zenith")
def gen(k):
    with torch.no_grad():
        return m.generate(ids, max_new_tokens=k, **kw)
gen(n); gen(1)
t1, tn = [], []
for _ in range(rounds):
    t = time.perf_counter(); gen(1); t1.append(time.perf_counter() - t)
    t = time.perf_counter(); gen(n); tn.append(time.perf_counter() - t)
per_token = (statistics.median(tn) - statistics.median(t1)) / (n - 1)
print(f"{scheme}: {n} tokens, wall per token after the first {per_token * 1e3:.2f} ms ({1 / per_token:.1f} tok/s), "
      f"first token {statistics.median(t1) * 1e3:.1f} ms")
with zenith.profile(trace=os.devnull) as p:
    gen(n)
ev = sorted(p.events, key=lambda e: e[4])
graphs = collections.Counter(e[2] for e in ev)
dec = max(graphs, key=graphs.get)
steps = collections.defaultdict(list)
per_step = graphs[dec] // (n - 1)
de = [e for e in ev if e[2] == dec]
spans, ops = [], []
for s in range(n - 1):
    chunk = de[s * per_step:(s + 1) * per_step]
    spans.append((chunk[-1][4] + chunk[-1][5] - chunk[0][4]) / 1e3)
    ops.append(sum(e[5] for e in chunk) / 1e3)
starts = [de[s * per_step][4] / 1e3 for s in range(n - 1)]
between = [b - a for a, b in zip(starts, starts[1:])]
print(f"decode graph: {per_step} op events a step; per step median span {statistics.median(spans):.2f} ms, ops "
      f"{statistics.median(ops):.2f} ms (gaps inside the graph {statistics.median(spans) - statistics.median(ops):.2f}); "
      f"step start to step start {statistics.median(between):.2f} ms (outside the graph "
      f"{statistics.median(between) - statistics.median(spans):.2f})")
by = collections.defaultdict(lambda: [0, 0.0])
for e in de:
    by[e[0]][0] += 1; by[e[0]][1] += e[5] / 1e3
for op, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:12]:
    print(f"  {op:<22} {c // (n - 1):4d} a step  {t / (n - 1):7.3f} ms a step")
# qmatmul per shape: a step's calls, time, and (with the weight bytes from zenith.explain-free arithmetic, K x N x
# the format's bits) the streaming rate
qs = collections.defaultdict(lambda: [0, 0.0])
for e in de:
    if e[0] == "qmatmul":
        qs[str(e[6])][0] += 1; qs[str(e[6])][1] += e[5] / 1e3
for sh, (c, t) in sorted(qs.items(), key=lambda kv: -kv[1][1]):
    print(f"  qmatmul {sh}: {c // (n - 1)} a step, {t / (n - 1):.3f} ms a step, {t / c * 1e3:.1f} us a call")
