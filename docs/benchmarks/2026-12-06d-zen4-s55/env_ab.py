# In-process A/B of an environment switch read per call: one frozen quantized encoder (random init, seq 128),
# calls under each value alternated in shuffled rounds, outputs compared to the first value's.
# python env_ab.py VAR minilm|bert SCHEME ROUNDS VALUE[,VALUE...] [SEQ]   ("-" = unset; the first value is the baseline;
# SEQ: the first SEQ of the 128 tokens)
import os, random, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06c-zen4-s54"))
import torch, zenith
from encoder import encoder
from ab_report import report
var, name, scheme, rounds, values = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(",")
m, ids = encoder(name, scheme)
seq = int(sys.argv[6]) if len(sys.argv) > 6 else 128
ids = ids[:, :seq]
f = zenith.freeze(m)
def call(v):
    if v == "-": os.environ.pop(var, None)
    else: os.environ[var] = v
    t = time.perf_counter(); out = f(ids).last_hidden_state; return out, time.perf_counter() - t
with torch.no_grad():
    ref = call(values[0])[0]
    for v in values[1:]:
        o = call(v)[0]; print(f"{var}={v}: identical {torch.equal(o, ref)}, max diff {(o - ref).abs().max().item():.3g}")
    res = {v: [] for v in values}
    for _ in range(3):
        for v in values: call(v)
    for _ in range(rounds):
        for v in random.sample(values, len(values)): res[v].append(call(v)[1])
report(f"{name} s{seq} {scheme}", var, values, res)
