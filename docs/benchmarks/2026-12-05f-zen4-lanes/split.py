import os, time, torch, transformers, zenith, sys
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 32
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, "int4")
GF = os.environ.get("GF")
opts = {"guard_filter_fn": getattr(torch.compiler, GF)} if GF else None
cf = torch.compile(m.forward, backend="zenith", options=opts)
times = []
def timed(*a, **k):
    t = time.perf_counter(); r = cf(*a, **k); times.append(time.perf_counter() - t); return r
m.forward = timed
with torch.no_grad():
    m.generate(ids, **kw)
    for rep in range(3):
        times.clear(); t0 = time.perf_counter(); m.generate(ids, **kw); wall = time.perf_counter() - t0
        dec = times[1:]
        print(f"wall {wall*1e3:.1f}  prompt fwd {times[0]*1e3:.1f}  decode fwd median {sorted(dec)[len(dec)//2]*1e3:.2f} "
              f"sum {sum(dec)*1e3:.1f}  outside forward {(wall - sum(times))*1e3/n:.2f} ms a token")
