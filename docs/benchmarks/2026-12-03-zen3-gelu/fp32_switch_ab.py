# An fp32 encoder with a temporary switch the C++ reads at every call (VAR=VALUE the old way, unset the new), the same
# frozen model called both ways in alternating rounds (zenith.bench.stats.paired_rounds), outputs checked against eager.
# python fp32_switch_ab.py VAR VALUE [rounds] [minilm|bert] [seq]
import os, sys, copy, statistics, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
var, value = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 30
name = sys.argv[4] if len(sys.argv) > 4 else "minilm"
seq = int(sys.argv[5]) if len(sys.argv) > 5 else 128
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, seq)); am = torch.ones_like(ids)
fp = zenith.freeze(copy.deepcopy(m))
def with_var(on):
    def f(*a):
        if on: os.environ[var] = value
        else: os.environ.pop(var, None)
        return fp(*a)
    return f
v = {"old": with_var(True), "new": with_var(False)}
with torch.no_grad():
    ref = m(ids, am)[0]
    for k, f in v.items():
        print(f"{k}: max |out - eager| {(f(ids, am)[0] - ref).abs().max().item():.3g}")
    ts = paired_rounds(v, rounds, ids, am)
os.environ.pop(var, None)
med = {k: statistics.median(t) * 1e3 for k, t in ts.items()}
r, lo, hi = paired_ratio_ci(ts["old"], ts["new"])
print(f"{name} s{seq} fp32 {var}={value} old: {med['old']:.3f} ms, new {med['new']:.3f}; new / old {r:.3f} [{lo:.3f}, {hi:.3f}]")
