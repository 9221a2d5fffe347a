# The int8 GEMM split by rows (ZENITH_EXP_BYROWS=1, read per call) against columns (unset), one frozen quantized
# encoder (random init, seq 128), calls alternated; outputs compared. python byrows_ab.py minilm|bert SCHEME [rounds]
import os, random, statistics, sys, time
import torch, zenith
from encoder import encoder
name = sys.argv[1]; scheme = sys.argv[2]; rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
m, ids = encoder(name, scheme)
f = zenith.freeze(m)
def call(k):
    if k == "new": os.environ["ZENITH_EXP_BYROWS"] = "1"
    else: os.environ.pop("ZENITH_EXP_BYROWS", None)
    t = time.perf_counter(); out = f(ids).last_hidden_state; return out, time.perf_counter() - t
with torch.no_grad():
    a, _ = call("new"); b, _ = call("old")
    print("outputs identical:", torch.equal(a, b), "max diff", (a - b).abs().max().item())
    res = {"new": [], "old": []}
    for _ in range(3): call("new"); call("old")
    for _ in range(rounds):
        for k in random.sample(list(res), 2): res[k].append(call(k)[1])
r = sorted(n / o for n, o in zip(res["new"], res["old"]))
print(f"{name} {scheme} {'AVX2' if os.environ.get('ZENITH_NO_AVX512') else 'default'}: by rows {statistics.median(res['new'])*1e3:.2f} ms, "
      f"by columns {statistics.median(res['old'])*1e3:.2f} ms, per round {statistics.median(r):.3f} [{r[len(r)//10]:.3f}, {r[-len(r)//10-1]:.3f}]")
