import collections, os, time, torch, transformers, zenith, sys
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16))
kw = dict(max_new_tokens=1, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, sys.argv[1] if len(sys.argv) > 1 else "int4")
m.forward = torch.compile(m.forward, backend="zenith")
with torch.no_grad():
    m.generate(ids, **kw)
    walls = []
    for i in range(5):
        t0 = time.perf_counter(); m.generate(ids, **kw); walls.append(time.perf_counter() - t0)
    with zenith.profile(trace=os.devnull) as p:
        m.generate(ids, **kw)
by = collections.defaultdict(lambda: [0, 0.0])
for op, node, graph, tid, ts, dur, shape in p.events:
    by[(op, str(shape)[:60])][0] += 1; by[(op, str(shape)[:60])][1] += dur / 1e3
print("prompt walls ms", [round(w * 1e3, 1) for w in walls], "op total", round(sum(t for _, t in by.values()), 1))
for k, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:14]:
    print(f"  {k[0]:<12} {k[1]:<60} x{c:<4} {t:8.2f} ms")
