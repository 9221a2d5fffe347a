# all-MiniLM-L6-v2 int8-dynamic (real weights, seq 128; BERT-base random init with `bert`) with a temporary switch
# that the C++ reads at every call (ZENITH_EXP_...: set = the old way), the same frozen model called with the
# variable set and unset in alternating rounds (zenith.bench.stats.paired_rounds); also fp32 for the ratio.
# python runtime_switch_ab.py VAR [rounds] [minilm|bert]
import os, sys, copy, statistics, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
var = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
name = sys.argv[3] if len(sys.argv) > 3 else "minilm"
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
fp = zenith.freeze(copy.deepcopy(m)); q = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-dynamic"))
def with_var(on):
    def f(*a):
        if on: os.environ[var] = "1"
        else: os.environ.pop(var, None)
        return q(*a)
    return f
v = {"fp32": fp, "old": with_var(True), "new": with_var(False)}
with torch.no_grad():
    a, b = v["old"](ids, am)[0], v["new"](ids, am)[0]
    print("outputs bit-identical:", torch.equal(a, b))
    ts = paired_rounds(v, rounds, ids, am)
os.environ.pop(var, None)
med = {k: statistics.median(t) * 1e3 for k, t in ts.items()}
r, lo, hi = paired_ratio_ci(ts["old"], ts["new"])
print(f"{name} s128 {var}: fp32 {med['fp32']:.3f} ms, int8 old {med['old']:.3f}, new {med['new']:.3f}; new / old {r:.3f} "
      f"[{lo:.3f}, {hi:.3f}]; int8 / fp32: old {paired_ratio_ci(ts['fp32'], ts['old'])[0]:.3f}, "
      f"new {paired_ratio_ci(ts['fp32'], ts['new'])[0]:.3f}")
