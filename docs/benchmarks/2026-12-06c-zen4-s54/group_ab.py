# AVX2 int8-dynamic: activation scales per 32 values (ZENITH_EXP_ACT_GROUP=1) against per 64 (=2), two frozen
# copies of one quantized encoder in one process, calls alternated; run with ZENITH_NO_AVX512=1, on a build with
# group_switch.diff applied (the switch is read when a plan is made, so each copy keeps the group it compiled with).
# python group_ab.py minilm|bert [rounds]
import copy, os, random, statistics, sys, time
import torch, zenith
from encoder import encoder
name = sys.argv[1] if len(sys.argv) > 1 else "minilm"; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
base, ids = encoder(name, "fp32")
with torch.no_grad(): ref = base(ids).last_hidden_state
m = zenith.quantize(copy.deepcopy(base), "int8-dynamic")
fns, outs = {}, {}
for g in ("1", "2"):
    os.environ["ZENITH_EXP_ACT_GROUP"] = g
    f = zenith.freeze(copy.deepcopy(m))
    with torch.no_grad():
        outs[g] = f(ids).last_hidden_state
    fns[g] = f
for g in fns:
    e = (outs[g] - ref).norm() / ref.norm()
    cos = torch.nn.functional.cosine_similarity(outs[g][0], ref[0], dim=-1)
    print(f"group {g}: rel err vs fp32 {e:.3e}, min cos per token {cos.min():.6f}")
t = {g: [] for g in fns}
with torch.no_grad():
    for _ in range(3):
        for f in fns.values(): f(ids)
    for r in range(rounds):
        for g in random.sample(list(fns), 2):
            s = time.perf_counter(); fns[g](ids); t[g].append(time.perf_counter() - s)
q = sorted(a / b for a, b in zip(t["2"], t["1"]))
n = len(q)
print(f"{name}: per 64 {statistics.median(t['2'])*1e3:.2f} ms, per 32 {statistics.median(t['1'])*1e3:.2f} ms; "
      f"ratio median {statistics.median(q):.3f} [p10 {q[n//10]:.3f}, p90 {q[9*n//10]:.3f}] over {n} rounds")
