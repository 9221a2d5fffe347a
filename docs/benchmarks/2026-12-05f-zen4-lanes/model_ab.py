# TinyLlama-1.1B config int4: q4_0 weights vs the same bytes as q4_0x8, two compiled models in one process,
# generate alternated; per-token decode time (median of forward calls after the prompt) and prompt time.
import copy, os, time, torch, transformers, zenith, statistics, sys
from zenith.bench.decode import tinyllama_config
from zenith.quant.formats import interleave_x8
from zenith.quant.modules import QLinear
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 32
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m4 = zenith.quantize(base, "int4")
del base
m8 = copy.deepcopy(m4)
conv = 0
for mod in m8.modules():
    if isinstance(mod, QLinear) and mod.format == "q4_0" and mod.weight.shape[0] % 8 == 0:
        mod.weight = interleave_x8(mod.weight); mod.format = "q4_0x8"; conv += 1
print("converted", conv)
res = {}
for name, m in (("q4_0", m4), ("q4_0x8", m8)):
    cf = torch.compile(m.forward, backend="zenith")
    times = []
    def timed(*a, _cf=cf, _t=times, **k):
        t = time.perf_counter(); r = _cf(*a, **k); _t.append(time.perf_counter() - t); return r
    m.forward = timed
    res[name] = (m, times, [], [])
with torch.no_grad():
    outs = {}
    for name, (m, times, tok, pr) in res.items():
        outs[name] = m.generate(ids, **kw)
    print("same tokens:", torch.equal(outs["q4_0"], outs["q4_0x8"]))
    for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
        order = list(res) if rep % 2 == 0 else list(res)[::-1]
        for name in order:
            m, times, tok, pr = res[name]
            times.clear(); m.generate(ids, **kw)
            pr.append(times[0]); tok.append(statistics.median(times[1:]))
for name, (m, times, tok, pr) in res.items():
    print(f"{name}: prompt {statistics.median(pr)*1e3:.1f} ms, decode forward {statistics.median(tok)*1e3:.2f} ms "
          f"(rounds {', '.join(f'{t*1e3:.2f}' for t in tok)})")
r = [a / b for a, b in zip(res["q4_0x8"][2], res["q4_0"][2])]
print("x8 / q4_0 per token, per round:", ", ".join(f"{v:.3f}" for v in r), "median", f"{statistics.median(r):.3f}")
