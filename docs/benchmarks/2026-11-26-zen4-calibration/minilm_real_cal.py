"""MiniLM static INT8 on real text: calibrated on 100 passages of licenses other than GPL-3,
evaluated on 60 GPL-3 paragraphs (mean-pooled embeddings, cosine against fp32)."""
import copy, glob, torch, zenith
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
tok, m = load_minilm(); m.eval()
def paras(path):
    t = open(path, errors="ignore").read().split("\n\n")
    return [p.strip().replace("\n", " ") for p in t if len(p.strip()) > 80]
cal_text = [p for f in sorted(glob.glob("/usr/share/common-licenses/*")) if "GPL-3" not in f for p in paras(f)][:100]
cal = [dict(tok(p, return_tensors="pt", truncation=True, max_length=128)) for p in cal_text]
sents = paras("/usr/share/common-licenses/GPL-3")[:60]
def emb(model, s):
    b = tok(s, return_tensors="pt", truncation=True, max_length=128)
    with torch.no_grad():
        h = model(**b).last_hidden_state
    return (h * b["attention_mask"][..., None]).sum(1) / b["attention_mask"].sum()
ref = [emb(m, s) for s in sents]
print("calibration passages", len(cal))
for kw in [dict(method="percentile"), dict(method="minmax"), dict(method="entropy")]:
    q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, **kw)
    cos = [torch.nn.functional.cosine_similarity(emb(q, s), r).item() for s, r in zip(sents, ref)]
    print(kw, "min cos %.4f mean %.4f" % (min(cos), sum(cos) / len(cos)), "kept", len(zenith.quant.summary(q).kept))
q = zenith.quantize(copy.deepcopy(m), "int8")
cos = [torch.nn.functional.cosine_similarity(emb(q, s), r).item() for s, r in zip(sents, ref)]
print("int8 (dynamic per 32)", "min cos %.4f mean %.4f" % (min(cos), sum(cos) / len(cos)))
