# One process's all-MiniLM-L6-v2 int8-dynamic / fp32 time (frozen, seq 128, paired rounds): for comparing two builds
# of _C in alternating processes (ab_builds.sh), each process's fp32 the anchor of its ratio.
# python ratio_probe.py [rounds]
import sys, copy, statistics, torch, zenith
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
m = load_minilm()[1]
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
v = {"fp32": zenith.freeze(copy.deepcopy(m)), "int8": zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-dynamic"))}
with torch.no_grad():
    ts = paired_rounds(v, rounds, ids, am)
print(f"fp32 {statistics.median(ts['fp32'])*1e3:.3f} ms int8 {statistics.median(ts['int8'])*1e3:.3f} ms "
      f"int8/fp32 {paired_ratio_ci(ts['fp32'], ts['int8'])[0]:.4f}")
