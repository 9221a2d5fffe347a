# Uniform activation rows quantized in one pass (new) or block by block (old), one compiled model, the switch
# (onepass_switch.diff: ZENITH_EXP_ONEPASS=0 is the old path, read per qmatmul call) flipped between calls in
# random order each round; per-round ratio new / old. Static INT8 as the bench quantizes encoders
# (ENCODER_STATIC: minmax, SmoothQuant 0.85, so x_mul on every smoothed layer) or dynamic INT8 (per row on
# AVX-512 VNNI). python onepass_ab.py bert|minilm int8-static|int8-dynamic [rounds] [seq]
import copy, sys, torch, transformers, zenith
from env_ab import alternate, summary, switched
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
call = switched("ZENITH_EXP_ONEPASS", lambda: f(*x).last_hidden_state)
with torch.no_grad():
    a, _ = call("new"); b, _ = call("old")
    print("max |new - old|", (a - b).abs().max().item())
    res = alternate(call, rounds)
print(f"{which} {scheme} seq {seq}: {summary(res)}")
