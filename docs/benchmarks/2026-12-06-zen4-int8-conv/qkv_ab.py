# Static INT8 (the bench's encoder calibration: ENCODER_STATIC, SmoothQuant) with Q, K and V sharing one
# divisor, one x_smooth tensor, so one qmatmul with parts (new), against the same model with each layer's
# x_smooth a tensor of its own (so three qmatmuls, the same values: the GEMM sharing alone), two compiled
# copies called alternately, per-round ratio new / old; and the accuracy of the shared divisor against
# per-layer divisors (calibrate.observe without first_inputs: each layer its own group, as before), MiniLM's
# real weights on 100 GPL-3 sentences, cosine of mean-pooled embeddings to fp32.
# python qkv_ab.py bert|minilm [rounds]
import copy, random, statistics, sys, time, torch, torch.nn.functional as F, transformers, zenith
from zenith.quant import QLinear
from zenith.quant import calibrate as cal
from zenith.bench.inference import token_batches, ENCODER_STATIC
torch.set_num_threads(2); torch.manual_seed(0)
which = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
if which == "bert":
    model = transformers.BertModel(transformers.BertConfig()).eval(); lo, hi = 0, 30000
else:
    from zenith.demo import load_minilm
    tok, model = load_minilm()[:2]; lo, hi = 1000, 20000
x = (torch.randint(lo, hi, (1, 128)), torch.ones(1, 128, dtype=torch.long))
q = zenith.quantize(copy.deepcopy(model), "int8-static", calibration=token_batches(1, 128, lo, hi, 20), **ENCODER_STATIC)
apart = copy.deepcopy(q)
for m in apart.modules():
    if type(m) is QLinear and m.x_smooth is not None:
        m.x_smooth = m.x_smooth.clone()
fns = {"new": zenith.compile(q), "old": zenith.compile(apart)}
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
if which == "minilm":
    text = open("/usr/share/common-licenses/GPL-3").read().split(".")
    sents = [s.strip().replace("\n", " ") for s in text if len(s.split()) > 5][:100]
    enc = tok(sents, padding=True, truncation=True, max_length=128, return_tensors="pt")
    orig = cal.observe
    def per_layer(*args, first_inputs=None, **kw):  # each layer its own group: the divisors as before
        return orig(*args, **kw)
    cal.observe = per_layer
    q_old = zenith.quantize(copy.deepcopy(model), "int8-static", calibration=token_batches(1, 128, lo, hi, 20),
                            **ENCODER_STATIC)
    cal.observe = orig
    def emb(m):
        with torch.no_grad():
            h = m(**enc).last_hidden_state
        w = enc["attention_mask"].unsqueeze(-1).float()
        return (h * w).sum(1) / w.sum(1)
    ref = emb(model)
    for name, m in (("shared divisor", q), ("per-layer divisors", q_old)):
        c = F.cosine_similarity(emb(m), ref)
        print(f"minilm {name}: cosine to fp32 min {c.min():.4f} mean {c.mean():.5f}")
