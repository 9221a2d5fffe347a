# int8-dynamic MiniLM / BERT-base s128, frozen: the 2-row u8 tile (ZENITH_EXP_U8OLD set, the old way) against the
# 4-row one (u8x4_switch.diff); paired rounds. python u8x4_ab.py [rounds] [minilm|bert] [scheme]
import os, sys, copy, statistics, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
name = sys.argv[2] if len(sys.argv) > 2 else "minilm"
scheme = sys.argv[3] if len(sys.argv) > 3 else "int8-dynamic"
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
fp = zenith.freeze(copy.deepcopy(m))
q = zenith.freeze(zenith.quantize(copy.deepcopy(m), scheme))
def sw(mod, on):
    def f(*a):
        if on: os.environ["ZENITH_EXP_U8OLD"] = "1"
        else: os.environ.pop("ZENITH_EXP_U8OLD", None)
        return mod(*a)
    return f
v = {"fp32": fp, "old": sw(q, True), "new": sw(q, False)}
with torch.no_grad():
    print("outputs bit-identical:", torch.equal(v["old"](ids, am)[0], v["new"](ids, am)[0]))
    ts = paired_rounds(v, rounds, ids, am)
os.environ.pop("ZENITH_EXP_U8OLD", None)
med = {k: round(statistics.median(t) * 1e3, 3) for k, t in ts.items()}
print(name, scheme, "s128 medians ms", med)
for a, b in (("fp32", "old"), ("fp32", "new"), ("old", "new")):
    print(f"  {b} / {a} %.3f [%.3f, %.3f]" % paired_ratio_ci(ts[a], ts[b]))
