# all-MiniLM-L6-v2 (real weights) and BERT-base (random init) int8-dynamic at seq 128, with sibling qmatmuls fused
# (Q, K, V as one) and not, plus fp32: each a zenith.freeze compiled under its setting (the switch was a temporary
# ZENITH_EXP_SIBLINGS_OFF read by the pass at compile time, siblings_switch.diff); paired rounds
# (zenith.bench.stats.paired_rounds), medians of per-round ratios. python siblings_ab.py [rounds]
import os, sys, copy, statistics, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
models = {"minilm": load_minilm()[1], "bert-base": BertModel(BertConfig()).eval()}
for name, m in models.items():
    ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
    q = zenith.quantize(copy.deepcopy(m), "int8-dynamic")
    v = {}
    with torch.no_grad():
        v["fp32"] = zenith.freeze(copy.deepcopy(m)); v["fp32"](ids, am)
        os.environ["ZENITH_EXP_SIBLINGS_OFF"] = "1"
        v["int8-apart"] = zenith.freeze(copy.deepcopy(q)); a = v["int8-apart"](ids, am)[0]
        os.environ.pop("ZENITH_EXP_SIBLINGS_OFF")
        v["int8-fused"] = zenith.freeze(copy.deepcopy(q)); b = v["int8-fused"](ids, am)[0]
        assert torch.equal(a, b), "fused and apart differ"
        ts = paired_rounds(v, rounds, ids, am)
    r = lambda x, y: statistics.median([p / s for p, s in zip(ts[x], ts[y])])
    print(f"{name} s128: fp32 {statistics.median(ts['fp32'])*1e3:.2f} ms, int8 apart {statistics.median(ts['int8-apart'])*1e3:.2f}, "
          f"fused {statistics.median(ts['int8-fused'])*1e3:.2f}; fused / apart {r('int8-fused', 'int8-apart'):.3f}; "
          f"int8 / fp32: apart {r('int8-apart', 'fp32'):.3f}, fused {r('int8-fused', 'fp32'):.3f} (outputs bit-identical)")
