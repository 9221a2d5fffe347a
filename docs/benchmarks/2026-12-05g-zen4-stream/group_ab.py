# TinyLlama-1.1B config: fp32, int4 at group 32 (q4_0, the default) and int4 at group 128
# (int4_g128), three compiled models in one process, generate alternated round by round;
# per round: the whole generate (16-token prompt, 32 new tokens), the prompt's forward,
# and the median decode forward. python group_ab.py [rounds]
import copy, statistics, sys, time, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 32
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
models = {"fp32": copy.deepcopy(base), "int4 g32": zenith.quantize(copy.deepcopy(base), "int4"),
          "int4 g128": zenith.quantize(copy.deepcopy(base), "int4", group_size=128)}
del base
res = {}
for name, m in models.items():
    cf = torch.compile(m.forward, backend="zenith")
    times = []
    def timed(*a, _cf=cf, _t=times, **k):
        t = time.perf_counter(); r = _cf(*a, **k); _t.append(time.perf_counter() - t); return r
    m.forward = timed
    res[name] = (m, times, [], [], [])
with torch.no_grad():
    for name, (m, *_rest) in res.items():
        m.generate(ids, **kw)
    for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
        order = list(res) if rep % 2 == 0 else list(res)[::-1]
        for name in order:
            m, times, total, prompt, tok = res[name]
            times.clear(); t = time.perf_counter(); m.generate(ids, **kw); total.append(time.perf_counter() - t)
            prompt.append(times[0]); tok.append(statistics.median(times[1:]))
md = statistics.median
for name, (m, times, total, prompt, tok) in res.items():
    print(f"{name}: generate {md(total)*1e3:.1f} ms ({n / md(total):.1f} tok/s), prompt {md(prompt)*1e3:.1f} ms, "
          f"decode forward {md(tok)*1e3:.2f} ms")
f = res["fp32"][2]
for name in ("int4 g32", "int4 g128"):
    r = sorted(a / b for a, b in zip(f, res[name][2]))
    print(f"{name}: tokens/s over fp32's per round, median {md(r):.2f}x [{r[0]:.2f}, {r[-1]:.2f}]")
