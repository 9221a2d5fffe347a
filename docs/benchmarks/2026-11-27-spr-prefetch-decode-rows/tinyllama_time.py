import sys, time, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.set_num_threads(2); torch.manual_seed(0)
cfg = tinyllama_config()
base = transformers.LlamaForCausalLM(cfg).eval()
m = zenith.quantize(base, sys.argv[1]).eval()
m.forward = torch.compile(m.forward, backend="zenith")
ids = torch.randint(0, cfg.vocab_size, (1, 16))
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
with torch.no_grad():
    m.generate(ids, max_new_tokens=32, **kw)
    t1, t32 = [], []
    for i in range(5):
        t = time.perf_counter(); m.generate(ids, max_new_tokens=1, **kw); t1.append(time.perf_counter() - t)
        t = time.perf_counter(); m.generate(ids, max_new_tokens=32, **kw); t32.append(time.perf_counter() - t)
t1.sort(); t32.sort()
print(f"first {t1[2]*1e3:.1f} ms  32 tokens {t32[2]*1e3:.1f} ms  per token after first {(t32[2]-t1[2])/31*1e3:.2f} ms")
