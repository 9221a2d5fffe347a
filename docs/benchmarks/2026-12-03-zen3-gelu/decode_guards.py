# per-step wall with and without Dynamo's guards on nn module parameters (guard_filter_fn), int4 TinyLlama
import statistics, sys, time, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16))
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, "int4")
f0 = m.forward
mods = {}
for name, opt in (("guards", {}), ("skip-nn-guards", {"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})):
    torch._dynamo.reset()
    m.forward = torch.compile(f0, backend="zenith", options=opt)
    def gen(k):
        with torch.no_grad():
            return m.generate(ids, max_new_tokens=k, **kw)
    gen(32); gen(1)
    t1, tn = [], []
    for _ in range(5):
        t = time.perf_counter(); gen(1); t1.append(time.perf_counter() - t)
        t = time.perf_counter(); gen(32); tn.append(time.perf_counter() - t)
    print(name, f"{(statistics.median(tn) - statistics.median(t1)) / 31 * 1e3:.2f} ms a token")
