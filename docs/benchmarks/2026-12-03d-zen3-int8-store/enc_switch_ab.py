# Frozen int8-dynamic all-MiniLM-L6-v2 (real weights) or BERT-base (random init) at seq 128: one temporary C++ switch
# (an env variable read per call; set = the old way) off against on, paired rounds; fp32 for the ratios.
# python enc_switch_ab.py VAR [rounds] [minilm|bert] [scheme]
#   ZENITH_EXP_U8OLD   u8x4_switch.diff: set = the 2-row u8 tile, unset = the 4-row one
#   ZENITH_EXP_STATIC  dynamic_split.diff: set = fixed column-block shares, unset = handed out as threads ask
# (ab_outputs.txt's runs were made with two copies of this script, one per switch, labelled old/new and static/dynamic.)
import os, sys, copy, statistics, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
var = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
name = sys.argv[3] if len(sys.argv) > 3 else "minilm"
scheme = sys.argv[4] if len(sys.argv) > 4 else "int8-dynamic"
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
fp = zenith.freeze(copy.deepcopy(m))
q = zenith.freeze(zenith.quantize(copy.deepcopy(m), scheme))
def sw(on):
    def f(*a):
        if on: os.environ[var] = "1"
        else: os.environ.pop(var, None)
        return q(*a)
    return f
v = {"fp32": fp, "old": sw(True), "new": sw(False)}
with torch.no_grad():
    print("outputs bit-identical:", torch.equal(v["old"](ids, am)[0], v["new"](ids, am)[0]))
    ts = paired_rounds(v, rounds, ids, am)
os.environ.pop(var, None)
med = {k: round(statistics.median(t) * 1e3, 3) for k, t in ts.items()}
print(name, scheme, var, "s128 medians ms", med)
for a, b in (("fp32", "old"), ("fp32", "new"), ("old", "new")):
    print(f"  {b} / {a} %.3f [%.3f, %.3f]" % paired_ratio_ci(ts[a], ts[b]))
