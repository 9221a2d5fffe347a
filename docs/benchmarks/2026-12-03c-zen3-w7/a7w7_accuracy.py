"""Which operand to narrow to 7 bits for AVX2's maddubs: all-MiniLM-L6-v2 (real weights)
on 120 GPL-3 sentences, every nn.Linear fake-quantized in PyTorch (activations per 32
values, weights per output channel), cosine of the mean-pooled embedding to fp32."""
# Fake-quant accuracy of the AVX2 u8s8 options on all-MiniLM-L6-v2 (real weights, real text)
import torch, zenith, re
from zenith.demo import load_minilm
torch.manual_seed(0)
tok, m = load_minilm()
text = open("/usr/share/common-licenses/GPL-3").read()
sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) > 5][:120]
enc = tok(sents, padding=True, truncation=True, max_length=128, return_tensors="pt")
def embed(model):
    with torch.no_grad():
        h = model(**enc).last_hidden_state
    mk = enc["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((h * mk).sum(1) / mk.sum(1), dim=-1)
ref = embed(m)
def qx(x, levels, block=32):
    sh = x.shape; K = sh[-1]; xb = x.reshape(-1, K // block, block)
    s = xb.abs().amax(-1, keepdim=True) / levels; s[s == 0] = 1
    return (torch.clamp(torch.round(xb / s), -levels, levels) * s).reshape(sh)
def qw(w, wbits7, pack_rounding):
    s = w.abs().amax(1, keepdim=True) / 127
    c = torch.round(w / s).clamp(-127, 127)
    if wbits7 == "direct":
        s2 = w.abs().amax(1, keepdim=True) / 63
        return torch.round(w / s2).clamp(-64, 63) * s2
    if wbits7 == "halve":
        return torch.round(c / 2).clamp(-64, 63) * (2 * s)   # round half to even
    return c * s
import copy
def variant(alev, wmode):
    q = copy.deepcopy(m)
    for mod in q.modules():
        if isinstance(mod, torch.nn.Linear):
            W = qw(mod.weight.data, wmode, None); b = mod.bias
            mod.forward = (lambda W, b: (lambda x: torch.nn.functional.linear(qx(x, alev), W, b)))(W, b)
    e = embed(q); cos = (e * ref).sum(-1)
    return cos.min().item(), cos.mean().item()
for name, alev, wmode in [("A7: a7 per 32, w8 (today)", 63, None), ("A7 W7: a7 per 32, w7 direct", 63, "direct"),
                          ("W7 direct: a8, w7", 127, "direct")]:
    mn, mean = variant(alev, wmode)
    print(f"{name:32s} min cos {mn:.5f}  mean {mean:.6f}  1-mean {1-mean:.2e}")
