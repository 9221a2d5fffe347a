# Gemma 3 270M (real weights, from the GGUF, de-quantized) perplexity on GPL-3's first 2048
# tokens (windows of 128, as the bench's gemma3-270m-perplexity), eager fp32 against
# zenith.quantize "int4" at each group size, symmetric and not. The quantized layers run
# Zenith's kernels (QLinear) eagerly. python group_ppl.py
import copy, math, torch, zenith
from zenith.bench.decode import load_gemma3, window_nll, PPL_TEXT
torch.set_num_threads(2)
model, tok, _, how = load_gemma3()
text = open(PPL_TEXT, encoding="utf-8").read()
ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids[0]
seq, body = 128, 127
windows = [torch.cat([torch.tensor([tok.bos_token_id]), ids[i * body:(i + 1) * body]]) for i in range(2048 // body)]
def ppl(m):
    nll = cnt = 0
    with torch.no_grad():
        for w in windows:
            a, b = window_nll(m(w[None]).logits[0], w); nll += a; cnt += b
    return math.exp(nll / cnt), cnt
base, n = ppl(model)
print(f"weights: {how}; fp32 perplexity {base:.3f} over {n} tokens")
for g, sym in ((32, True), (64, True), (128, True), (32, False), (128, False)):
    m = zenith.quantize(copy.deepcopy(model), "int4", group_size=g, symmetric=sym)
    p, _ = ppl(m)
    fmt = zenith.quant.summary(m).layers[0].format if hasattr(zenith.quant, "summary") else "?"
    print(f"int4 group {g} {'symmetric' if sym else 'asymmetric'} ({fmt}): perplexity {p:.3f} ({(p / base - 1) * 100:+.2f}%)")
