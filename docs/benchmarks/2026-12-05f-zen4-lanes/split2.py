import os, time, torch, transformers, zenith, sys, collections
from zenith import partition
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 32
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, "int4")
cf = torch.compile(m.forward, backend="zenith")
times = []; inner = []; runs = []
orig = None
def timed(*a, **k):
    t = time.perf_counter(); r = cf(*a, **k); times.append(time.perf_counter() - t); return r
m.forward = timed
cls = partition.CompiledGraph if hasattr(partition, "CompiledGraph") else None
print(cls)
def wrap_call(self, args):
    t = time.perf_counter(); r = self._call(args); inner.append(time.perf_counter() - t); return r
cls.__call__ = wrap_call
with torch.no_grad():
    m.generate(ids, **kw)
    # wrap the executables' run_raw: rebuild calls after patching isn't possible; time via profile events instead
    for rep in range(2):
        times.clear(); inner.clear()
        with zenith.profile(trace=os.devnull) as p:
            m.generate(ids, **kw)
        ev = sorted(p.events, key=lambda e: e[4])
        graphs = collections.Counter(e[2] for e in ev); big = max(graphs, key=graphs.get)
        per = graphs[big] // (n - 1)
        dec = [e for e in ev if e[2] == big]
        spans = [(dec[i*per+per-1][4] + dec[i*per+per-1][5] - dec[i*per][4]) / 1e6 for i in range(n - 1)]
        med = lambda v: sorted(v)[len(v)//2] * 1e3
        print(f"forward {med(times[1:]):.2f}  graph call {med(inner[1:]):.2f}  ops span {med(spans):.2f} ms")
