# Gemma 3 270M from its Q4_K_M GGUF (or the TinyLlama-1.1B config, random init, zenith.quantize'd with SCHEME: model
# tinyllama-SCHEME), greedy decode of N tokens, one compiled model called with a temporary switch the C++ reads at
# every call (VAR set = the old way) set and unset in alternating rounds (paired_rounds).
# python decode_runtime_switch_ab.py VAR [rounds] [tokens] [gemma|tinyllama-int8|tinyllama-int4|...]
import os, sys, statistics, torch, zenith
from zenith.bench.decode import gemma3_gguf_path, load_gemma3, tinyllama_config, GEMMA_PROMPT
from zenith.bench.stats import paired_rounds, paired_ratio_ci
var = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 12; n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
name = sys.argv[4] if len(sys.argv) > 4 else "gemma"
if name != "gemma" and not (name.startswith("tinyllama-") and len(name) > len("tinyllama-")):
    sys.exit(f"model: gemma or tinyllama-SCHEME (a zenith.quantize scheme), not {name!r}")
torch.set_num_threads(2)
if name == "gemma":
    _, tok, _, _ = load_gemma3()
    ids = tok(GEMMA_PROMPT, return_tensors="pt").input_ids
    m = zenith.load_gguf(gemma3_gguf_path())[0].eval()
    name = "gemma3-270m gguf"
else:
    import transformers
    torch.manual_seed(0)
    m = zenith.quantize(transformers.LlamaForCausalLM(tinyllama_config()).eval(), name.split("-", 1)[1])
    ids = torch.randint(0, 32000, (1, 16))
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m.forward = torch.compile(m.forward, backend="zenith")
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
print(f"{name} decode {n} tokens: unset / set ({var}) time {r:.3f} [{lo:.3f}, {hi:.3f}]; tok/s set "
      f"{n/statistics.median(ts['set']):.1f}, unset {n/statistics.median(ts['unset']):.1f}; tokens equal {torch.equal(a, b)}")
