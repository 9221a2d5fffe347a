import time, sys, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.set_num_threads(2); torch.manual_seed(0)
cfg = tinyllama_config()
base = transformers.LlamaForCausalLM(cfg).eval()
scheme = sys.argv[1] if len(sys.argv) > 1 else "int4"
m = zenith.quantize(base, scheme).eval() if scheme != "fp32" else base
m.forward = torch.compile(m.forward, backend="zenith")
ids = torch.randint(0, cfg.vocab_size, (1, 16))
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
with torch.no_grad():
    m.generate(ids, max_new_tokens=32, **kw)
    for rep in range(3):
        t0 = time.perf_counter(); m.generate(ids, max_new_tokens=1, **kw); t1 = time.perf_counter()
        m.generate(ids, max_new_tokens=32, **kw); t2 = time.perf_counter()
        print(f"first {1e3*(t1-t0):.1f} ms  32 tok {1e3*(t2-t1):.1f} ms  -> {32/(t2-t1):.1f} tok/s, step {(t2-t1-(t1-t0))/31*1e3:.2f} ms")
with torch.no_grad():
    with zenith.profile() as p:
        t0 = time.perf_counter(); m.generate(ids, max_new_tokens=1, **kw); t1 = time.perf_counter()
    print(f"prefill wall {1e3*(t1-t0):.1f}"); print(p)
    with zenith.profile() as p:
        t0 = time.perf_counter(); m.generate(ids, max_new_tokens=32, **kw); t1 = time.perf_counter()
    print(f"32 wall {1e3*(t1-t0):.1f}"); print(p)
