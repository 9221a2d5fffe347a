import collections, os, time, torch, transformers, zenith, sys
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 16
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, sys.argv[1] if len(sys.argv) > 1 else "int4")
m.forward = torch.compile(m.forward, backend="zenith")
with torch.no_grad():
    m.generate(ids, **kw)
    with zenith.profile(trace=os.devnull) as p:
        m.generate(ids, **kw)
ev = sorted(p.events, key=lambda e: e[4])
graphs = collections.Counter(e[2] for e in ev); big = max(graphs, key=graphs.get)
dec = [e for e in ev if e[2] == big]
per_call = graphs[big] // (n - 1)
gap_before = collections.defaultdict(lambda: [0, 0.0]); between = []
for i in range(1, len(dec)):
    g = (dec[i][4] - (dec[i-1][4] + dec[i-1][5])) / 1e3
    if i % per_call == 0: between.append(g); continue
    k = (dec[i-1][0], dec[i][0]); gap_before[k][0] += 1; gap_before[k][1] += g
tot = sum(t for _, t in gap_before.values())
print(f"ops per call {per_call}; gaps inside calls {tot/(n-1):.3f} ms a token; between calls median {sorted(between)[len(between)//2]:.3f} ms")
for k, (c, t) in sorted(gap_before.items(), key=lambda kv: -kv[1][1])[:20]:
    print(f"  {k[0]:>12} -> {k[1]:<12} x{c:<5} {t/(n-1):7.3f} ms a token, {t/c*1e3:7.1f} us each")
