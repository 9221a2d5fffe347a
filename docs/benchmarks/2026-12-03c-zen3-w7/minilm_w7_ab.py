# all-MiniLM-L6-v2 (real weights; BERT-base random init with `bert`) seq 128, int8-dynamic: 8-bit linear weights
# against linear_weight_bits=7, the latter with the u8 tile (ZENITH_EXP_U8W7 set, the old way) and the w7 tile,
# in alternating rounds (paired); fp32 for the ratios. python minilm_w7_ab.py [rounds] [minilm|bert]
import os, sys, copy, statistics, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
name = sys.argv[2] if len(sys.argv) > 2 else "minilm"
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
fp = zenith.freeze(copy.deepcopy(m))
w8 = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-dynamic"))
w7 = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-dynamic", linear_weight_bits=7))
def sw(mod, on):
    def f(*a):
        if on: os.environ["ZENITH_EXP_U8W7"] = "1"
        else: os.environ.pop("ZENITH_EXP_U8W7", None)
        return mod(*a)
    return f
v = {"fp32": fp, "w8": sw(w8, False), "w7-u8tile": sw(w7, True), "w7": sw(w7, False)}
with torch.no_grad():
    print("w7 outputs bit-identical between the tiles:", torch.equal(v["w7-u8tile"](ids, am)[0], v["w7"](ids, am)[0]))
    ts = paired_rounds(v, rounds, ids, am)
os.environ.pop("ZENITH_EXP_U8W7", None)
med = {k: round(statistics.median(t) * 1e3, 3) for k, t in ts.items()}
print(name, "s128 medians ms", med)
for a, b in (("fp32", "w8"), ("fp32", "w7"), ("w8", "w7"), ("w7-u8tile", "w7")):
    print(f"  {b} / {a} %.3f [%.3f, %.3f]" % paired_ratio_ci(ts[a], ts[b]))
