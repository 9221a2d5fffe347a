# Uniform activation rows quantized in one pass (new) or block by block (old), one compiled model, the switch
# (onepass_switch.diff: ZENITH_EXP_ONEPASS=0 is the old path, read per qmatmul call) flipped between calls in
# random order each round; per-round ratio new / old. Static INT8 as the bench quantizes encoders
# (ENCODER_STATIC: minmax, SmoothQuant 0.85, so x_mul on every smoothed layer) or dynamic INT8 (per row on
# AVX-512 VNNI). python onepass_ab.py bert|minilm int8-static|int8-dynamic [rounds] [seq]
import copy, os, random, statistics, sys, time, torch, transformers, zenith
from zenith.bench.inference import token_batches, ENCODER_STATIC
torch.set_num_threads(2); torch.manual_seed(0)
which, scheme = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
seq = int(sys.argv[4]) if len(sys.argv) > 4 else 128
if which == "bert":
    model = transformers.BertModel(transformers.BertConfig()).eval(); lo, hi = 0, 30000
else:
    from zenith.demo import load_minilm
    model = load_minilm()[1]; lo, hi = 1000, 20000
x = (torch.randint(lo, hi, (1, seq)), torch.ones(1, seq, dtype=torch.long))
kw = dict(calibration=token_batches(1, seq, lo, hi, 20), **ENCODER_STATIC) if scheme == "int8-static" else {}
q = zenith.quantize(copy.deepcopy(model), scheme, **kw)
f = zenith.compile(q)
res = {"new": [], "old": []}
def call(k):
    if k == "old": os.environ["ZENITH_EXP_ONEPASS"] = "0"
    else: os.environ.pop("ZENITH_EXP_ONEPASS", None)
    t = time.perf_counter(); out = f(*x).last_hidden_state; dt = time.perf_counter() - t
    return out, dt
with torch.no_grad():
    a, _ = call("new"); b, _ = call("old")
    print("max |new - old|", (a - b).abs().max().item())
    for _ in range(3):
        call("new"); call("old")
    for r in range(rounds):
        for k in random.sample(list(res), 2):
            res[k].append(call(k)[1])
ratios = sorted(n / o for n, o in zip(res["new"], res["old"]))
print(f"{which} {scheme} seq {seq}: new {statistics.median(res['new'])*1e3:.2f} ms, old {statistics.median(res['old'])*1e3:.2f} ms, "
      f"new/old per round median {statistics.median(ratios):.3f} [{ratios[len(ratios)//10]:.3f}, {ratios[-len(ratios)//10-1]:.3f}] (p10, p90)")
