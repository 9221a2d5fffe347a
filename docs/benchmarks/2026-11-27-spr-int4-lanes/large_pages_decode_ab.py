import time, sys, copy, statistics, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.set_num_threads(2); torch.manual_seed(0)
cfg = tinyllama_config()
base = transformers.LlamaForCausalLM(cfg).eval()
scheme = sys.argv[1] if len(sys.argv) > 1 else "int4"
a = zenith.quantize(base, scheme).eval()
b = copy.deepcopy(a)
print([l.strip() for l in open("/proc/self/smaps_rollup") if "AnonHuge" in l])
for m in (a, b): m.forward = torch.compile(m.forward, backend="zenith")
ids = torch.randint(0, cfg.vocab_size, (1, 16))
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
res = {"large pages": [], "4k (deepcopy)": []}
with torch.no_grad():
    ra = a.generate(ids, max_new_tokens=32, **kw); rb = b.generate(ids, max_new_tokens=32, **kw)
    assert torch.equal(ra, rb)
    for rep in range(8):
        order = (("large pages", a), ("4k (deepcopy)", b))
        for name, m in order if rep % 2 == 0 else order[::-1]:
            t0 = time.perf_counter(); m.generate(ids, max_new_tokens=32, **kw); res[name].append(time.perf_counter() - t0)
for k, v in res.items(): print(scheme, k, f"median {statistics.median(v)*1e3:.1f} ms -> {32/statistics.median(v):.1f} tok/s", [round(x*1e3) for x in v])
