# GELU's old and new array kernels inside whole encoders, fp32 and int8-dynamic: a temporary switch the C++ reads
# at every gelu_exact_n call (ZENITH_EXP_OLDGELU set = the old way; both arms pay its getenv), the same frozen
# models called with it set and unset in alternating rounds (zenith.bench.stats.paired_rounds).
# python gelu_switch_ab.py [rounds] [minilm|bert] [seq]
import os, sys, copy, statistics, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
name = sys.argv[2] if len(sys.argv) > 2 else "minilm"
seq = int(sys.argv[3]) if len(sys.argv) > 3 else 128
var = "ZENITH_EXP_OLDGELU"
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, seq)); am = torch.ones_like(ids)
fp = zenith.freeze(copy.deepcopy(m)); q = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-dynamic"))
def with_var(model, on):
    def f(*a):
        if on: os.environ[var] = "1"
        else: os.environ.pop(var, None)
        return model(*a)
    return f
v = {"fp32 old": with_var(fp, True), "fp32 new": with_var(fp, False),
     "int8 old": with_var(q, True), "int8 new": with_var(q, False)}
with torch.no_grad():
    ref = m(ids, am)[0]
    for k, f in v.items():
        out = f(ids, am)[0]
        print(f"{k}: max |out - eager fp32| {(out - ref).abs().max().item():.3g}")
    ts = paired_rounds(v, rounds, ids, am)
os.environ.pop(var, None)
med = {k: statistics.median(t) * 1e3 for k, t in ts.items()}
for p in ("fp32", "int8"):
    r, lo, hi = paired_ratio_ci(ts[p + " old"], ts[p + " new"])
    print(f"{name} s{seq} {p}: old {med[p + ' old']:.3f} ms, new {med[p + ' new']:.3f}; new / old {r:.3f} [{lo:.3f}, {hi:.3f}]")
r, lo, hi = paired_ratio_ci(ts["fp32 new"], ts["int8 new"])
print(f"{name} s{seq} int8 / fp32 (new): {r:.3f} [{lo:.3f}, {hi:.3f}]")
