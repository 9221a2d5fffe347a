# paired: ZENITH_EXP_STATIC=1 vs ZENITH_EXP_T=<T> (dynamic tasks of T panels)
import os, sys, copy, statistics, torch, zenith
from zenith.demo import load_minilm
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
T = sys.argv[1]; seq = int(sys.argv[2]); rounds = int(sys.argv[3])
m = load_minilm()[1]
ids = torch.randint(1000, 20000, (1, seq)); am = torch.ones_like(ids)
fp = zenith.freeze(copy.deepcopy(m))
def mode(static):
    def f(*a):
        if static: os.environ["ZENITH_EXP_STATIC"] = "1"
        else: os.environ.pop("ZENITH_EXP_STATIC", None)
        os.environ["ZENITH_EXP_T"] = T
        return fp(*a)
    return f
v = {"static": mode(True), "tasks": mode(False)}
with torch.no_grad():
    ts = paired_rounds(v, rounds, ids, am)
r, lo, hi = paired_ratio_ci(ts["static"], ts["tasks"])
print(f"minilm s{seq} T={T}: static {statistics.median(ts['static'])*1e3:.3f} ms, tasks {statistics.median(ts['tasks'])*1e3:.3f}; tasks/static {r:.3f} [{lo:.3f}, {hi:.3f}]")
