# BERT-base s128 (random init): each GEMM node's GFLOP/s from zenith.profile's trace,
# median of 7 calls, grouped by shape (M x N x K; an N = 768 node right after an N = 3072
# one is the FFN's second GEMM, K = 3072). Issue 17 item 2's per-shape report:
#   [ZENITH_NO_AVX512=1] .venv/bin/python bert_gemms.py
import sys, collections, statistics, torch, zenith
from transformers import BertConfig, BertModel
torch.set_num_threads(2)
torch.manual_seed(0)
m = BertModel(BertConfig()).eval(); x = torch.randint(0, 30000, (1, 128))
f = zenith.compile(m)
per = collections.defaultdict(list)
with torch.no_grad():
    for _ in range(3): f(x)
    for _ in range(7):
        with zenith.profile(trace="/tmp/exp/tb.json") as p: f(x)
        for op, node, graph, tid, ts, dur, shape in p.events: per[(op, node, tuple(shape))].append(dur)
ops = collections.Counter()
rows = sorted(per.items(), key=lambda kv: kv[0][1])
prevN = 0; byshape = collections.defaultdict(list); total = 0; gemm = 0
for (op, node, shape), d in rows:
    t = statistics.median(d) * 1e-6; total += t
    if op not in ("addmm", "matmul", "linear", "qmatmul"): continue
    M, N = shape[-2] if len(shape) > 1 else 1, shape[-1]
    M = 1
    for s in shape[:-1]: M *= s
    K = 3072 if (N == 768 and prevN == 3072) else 768
    prevN = N
    byshape[(M, N, K)].append(2 * M * N * K / t / 1e9); gemm += t
for k, v in byshape.items(): print(f"{k[0]} x {k[1]} x {k[2]}: {len(v)} nodes, median {statistics.median(v):.1f} GFLOP/s (min {min(v):.1f}, max {max(v):.1f})")
print(f"GEMM time {gemm*1e3:.1f} ms of {total*1e3:.1f} ms kernel time")
