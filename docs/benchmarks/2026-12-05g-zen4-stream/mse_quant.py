# Prototype: symmetric 4-bit groups with the scale chosen per group by least squares over
# candidate scales (as llama.cpp's make_qx_quants), against ggml's q4_0 rule (d = the extreme
# value / -8). all-MiniLM-L6-v2 real weights, 200 GPL-3 lines: 1 - mean cosine to fp32.
# python mse_quant.py
import copy, torch, zenith
from zenith.quant import formats
from zenith.demo import load_minilm
torch.set_num_threads(2)

def q_sym4_mse(g, steps=19):
    def quant(x):
        xb = formats._groups(x, g)
        imax = xb.abs().argmax(dim=-1, keepdim=True)
        ext = torch.gather(xb, -1, imax)  # the signed extreme
        best_err = None
        for s in range(steps):
            # candidate: the extreme maps to -(8 - 0.1 (s - steps // 2)) (llama.cpp's -nmax +- 0.1 is)
            t = -8 + 0.1 * (s - steps // 2)
            inv = torch.where(ext != 0, t / ext, torch.zeros_like(ext))
            q = torch.round(xb * inv).clamp(-8, 7)
            sqq = (q * q).sum(-1, keepdim=True)
            d = torch.where(sqq > 0, (xb * q).sum(-1, keepdim=True) / sqq.clamp_min(1), torch.zeros_like(sqq))
            d = d.half().float()  # stored as f16
            err = ((xb - d * q) ** 2).sum(-1, keepdim=True)
            if best_err is None:
                best_err, best_d, best_q = err, d, q
            else:
                better = err < best_err
                best_err = torch.where(better, err, best_err)
                best_d = torch.where(better, d, best_d)
                best_q = torch.where(better, q, best_q)
        qu = (best_q + 8).to(torch.uint8)
        return torch.cat([formats._f16_bytes(best_d), formats._pack_nibbles(qu)], dim=-1).reshape(x.shape[0], -1)
    return quant

tok, model = load_minilm()
lines = [l.strip() for l in open("/usr/share/common-licenses/GPL-3", encoding="utf-8") if len(l.strip()) > 40][:200]
enc = tok(lines, padding=True, truncation=True, max_length=128, return_tensors="pt")
def emb(m):
    with torch.no_grad():
        o = m(input_ids=enc.input_ids, attention_mask=enc.attention_mask).last_hidden_state
        mask = enc.attention_mask[:, :, None].float()
        return torch.nn.functional.normalize((o * mask).sum(1) / mask.sum(1), dim=-1)
ref = emb(model)
for g in (32, 64, 128):
    fmt = {32: "q4_0", 64: "int4_g64", 128: "int4_g128"}[g]
    for name in ("ggml rule", "least squares"):
        orig = formats.FORMATS[fmt].quantize
        if name == "least squares":
            formats.FORMATS[fmt] = formats.Format(**{**formats.FORMATS[fmt].__dict__, "quantize": q_sym4_mse(g)})
        m = zenith.quantize(copy.deepcopy(model), "int4", group_size=g)
        formats.FORMATS[fmt] = formats.Format(**{**formats.FORMATS[fmt].__dict__, "quantize": orig})
        cos = (emb(m) * ref).sum(-1)
        print(f"group {g:<3} {name:<13}: min cosine {cos.min():.4f}, 1 - mean {1 - cos.mean().item():.2e}")
