# TinyLlama-1.1B config (random init) int8 (or another scheme) greedy decode, one compiled model called with a temporary
# switch the C++ reads at every call (VAR set = the old way) set and unset in alternating rounds (paired_rounds).
# python tinyllama_switch_ab.py VAR [rounds] [tokens] [scheme]
import os, sys, statistics, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
from zenith.bench.stats import paired_rounds, paired_ratio_ci
var = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8; n = int(sys.argv[3]) if len(sys.argv) > 3 else 32
scheme = sys.argv[4] if len(sys.argv) > 4 else "int8"
torch.manual_seed(0); torch.set_num_threads(2)
m = zenith.quantize(transformers.LlamaForCausalLM(tinyllama_config()).eval(), scheme)
m.forward = torch.compile(m.forward, backend="zenith")
ids = torch.randint(0, 32000, (1, 16))
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
def gen(on):
    def f():
        if on: os.environ[var] = "1"
        else: os.environ.pop(var, None)
        return m.generate(ids, **kw)
    return f
with torch.no_grad():
    a, b = gen(True)(), gen(False)()
    ts = paired_rounds({"set": gen(True), "unset": gen(False)}, rounds)
os.environ.pop(var, None)
r, lo, hi = paired_ratio_ci(ts["set"], ts["unset"])
print(f"tinyllama {scheme} decode {n} tokens: unset / set ({var}) time {r:.3f} [{lo:.3f}, {hi:.3f}]; tok/s set "
      f"{n/statistics.median(ts['set']):.1f}, unset {n/statistics.median(ts['unset']):.1f}; tokens equal {torch.equal(a, b)}")
