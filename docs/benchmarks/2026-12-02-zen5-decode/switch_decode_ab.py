# Gemma 3 270M from its Q4_K_M GGUF (the file's own blocks), greedy decode of N tokens
# after the bench's prompt, with a temporary ZENITH_EXP_<...> switch set and unset: two
# models, each compiled and first run (planned, prepared) under its setting, then paired
# rounds (zenith.bench.stats.paired_rounds) of one generate each; the switch is a
# temporary getenv in the C++ (see *_switch.diff), not in the committed code.
# python switch_decode_ab.py <VAR> [rounds] [tokens]
import os, sys, statistics, torch, zenith
from zenith.bench.decode import gemma3_gguf_path, load_gemma3, GEMMA_PROMPT
from zenith.bench.stats import paired_rounds, paired_ratio_ci
var = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 12; n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
torch.set_num_threads(2)
_, tok, _, _ = load_gemma3()
ids = tok(GEMMA_PROMPT, return_tensors="pt").input_ids
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
fns, outs = {}, {}
for name, on in (("set", True), ("unset", False)):
    if on: os.environ[var] = "1"
    else: os.environ.pop(var, None)
    m = zenith.load_gguf(gemma3_gguf_path())[0].eval()
    m.forward = torch.compile(m.forward, backend="zenith")
    with torch.no_grad():
        outs[name] = m.generate(ids, **kw)
        m.generate(ids, **kw)
    fns[name] = lambda m=m: m.generate(ids, **kw)
os.environ.pop(var, None)
with torch.no_grad():
    ts = paired_rounds(fns, rounds)
r, lo, hi = paired_ratio_ci(ts["set"], ts["unset"])
agree = (outs["set"] == outs["unset"]).float().mean().item()
print(f"gemma3-270m gguf decode {n} tokens: unset / set ({var}) {r:.3f} [{lo:.3f}, {hi:.3f}]; "
      f"tok/s set {n/statistics.median(ts['set']):.1f}, unset {n/statistics.median(ts['unset']):.1f}; token agreement {agree:.2f}")
