# Per-call time of a compiled model with Dynamo's use_recursive_dict_tags_for_guards off / on,
# two compiled copies alternated in one process. python dicttags.py mobilenet|tinyllama
import copy, statistics, sys, time, torch, torchvision, zenith
import torch._dynamo.config as dc
torch.manual_seed(0); torch.set_num_threads(2)
which = sys.argv[1]
if which == "mobilenet":
    base = torchvision.models.mobilenet_v2().eval(); args = (torch.randn(1, 3, 224, 224),)
    def make(flag):
        m = copy.deepcopy(base)
        with dc.patch(use_recursive_dict_tags_for_guards=flag):
            c = torch.compile(m, backend="zenith")
            with torch.no_grad(): c(*args)
        return lambda: c(*args)
    calls = 50
else:
    import transformers
    from zenith.bench.decode import tinyllama_config
    base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
    ids = torch.randint(0, 32000, (1, 16))
    kw = dict(max_new_tokens=16, do_sample=False, pad_token_id=0, eos_token_id=None)
    def make(flag):
        m = zenith.quantize(copy.deepcopy(base), "int4")
        with dc.patch(use_recursive_dict_tags_for_guards=flag):
            m.forward = torch.compile(m.forward, backend="zenith")
            with torch.no_grad(): m.generate(ids, **kw)
        return lambda: m.generate(ids, **kw)
    calls = 1
fs = {False: make(False), True: make(True)}
res = {False: [], True: []}
with torch.no_grad():
    for rep in range(20):
        for flag in ((False, True) if rep % 2 == 0 else (True, False)):
            t = time.perf_counter()
            for _ in range(calls): fs[flag]()
            res[flag].append((time.perf_counter() - t) / calls)
md = statistics.median
r = sorted(b / a for a, b in zip(res[False], res[True]))
print(f"{which}: off {md(res[False])*1e3:.3f} ms, on {md(res[True])*1e3:.3f} ms; on/off median {md(r):.3f} [{r[4]:.3f}, {r[15]:.3f}]")
