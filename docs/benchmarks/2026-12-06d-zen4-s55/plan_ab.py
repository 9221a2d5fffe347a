# In-process A/B of a switch read when a plan is made: one frozen copy of a quantized encoder (random init, seq 128)
# per value, each compiled under its value, calls alternated in shuffled rounds; outputs compared to the first's.
# python plan_ab.py VAR minilm|bert SCHEME ROUNDS VALUE[,VALUE...] [SEQ]   ("-" = unset; the first is the baseline)
import copy, os, random, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06c-zen4-s54"))
import torch, zenith
from encoder import encoder
from ab_report import report
var, name, scheme, rounds, values = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(",")
seq = int(sys.argv[6]) if len(sys.argv) > 6 else 128
m, ids = encoder(name, scheme)
ids = ids[:, :seq]
fns, outs = {}, {}
with torch.no_grad():
    for v in values:
        if v == "-": os.environ.pop(var, None)
        else: os.environ[var] = v
        fns[v] = zenith.freeze(copy.deepcopy(m))
        outs[v] = fns[v](ids).last_hidden_state
    os.environ.pop(var, None)
    for v in values[1:]:
        o, ref = outs[v], outs[values[0]]
        print(f"{var}={v}: identical {torch.equal(o, ref)}, max diff {(o - ref).abs().max().item():.3g}")
    res = {v: [] for v in values}
    for _ in range(3):
        for v in values: fns[v](ids)
    for _ in range(rounds):
        for v in random.sample(values, len(values)):
            t = time.perf_counter(); fns[v](ids); res[v].append(time.perf_counter() - t)
report(f"{name} s{seq} {scheme}", var, values, res)
