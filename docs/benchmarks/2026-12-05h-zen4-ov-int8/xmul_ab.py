# In-process A/B: static INT8 (the bench's encoder calibration: minmax, smooth 0.85) with
# SmoothQuant's multiplier as a mul of its own (as before) against inside qmatmul (x_mul).
# Two compiled copies of one quantized model, called alternately; per-round ratio new / old.
# python xmul_ab.py bert|minilm [rounds]
import copy, random, statistics, sys, time, torch, transformers, zenith
from zenith.quant import QLinear
from zenith.bench.inference import token_batches, ENCODER_STATIC
torch.set_num_threads(2); torch.manual_seed(0)
which = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
if which == "bert":
    model = transformers.BertModel(transformers.BertConfig()).eval(); lo, hi = 0, 30000
else:
    from zenith.demo import load_minilm
    model = load_minilm()[1]; lo, hi = 1000, 20000
x = (torch.randint(lo, hi, (1, 128)), torch.ones(1, 128, dtype=torch.long))
q = zenith.quantize(copy.deepcopy(model), "int8-static", calibration=token_batches(1, 128, lo, hi, 20), **ENCODER_STATIC)

class OldQLinear(QLinear):  # the forward before this change
    def forward(self, x):
        if self.x_smooth is not None:
            x = x * self.x_smooth
        return torch.ops.zenith.qlinear(x, self.weight, self.bias, self.format, self.x_scale, self.row_scale)

old = copy.deepcopy(q)
for m in old.modules():
    if type(m) is QLinear:
        m.__class__ = OldQLinear
fns = {"new": zenith.compile(q), "old": zenith.compile(old)}
res = {k: [] for k in fns}
with torch.no_grad():
    a, b = fns["new"](*x).last_hidden_state, fns["old"](*x).last_hidden_state
    print("max |new - old|", (a - b).abs().max().item())
    for _ in range(3):
        for f in fns.values(): f(*x)
    for r in range(rounds):
        for k in random.sample(list(fns), 2):
            t = time.perf_counter(); fns[k](*x); res[k].append(time.perf_counter() - t)
ratios = sorted(n / o for n, o in zip(res["new"], res["old"]))
print(f"{which}: new {statistics.median(res['new'])*1e3:.2f} ms, old {statistics.median(res['old'])*1e3:.2f} ms, "
      f"new/old per round median {statistics.median(ratios):.3f} [{ratios[len(ratios)//10]:.3f}, {ratios[-len(ratios)//10-1]:.3f}] (p10, p90)")
