"""MiniLM static INT8 accuracy on real text: mean-pooled embeddings of 60 GPL-3 paragraphs,
cosine against fp32, per calibration method (calibrated on the bench's random-id batches)."""
import copy, torch, zenith, sys
from zenith.demo import load_minilm
from zenith.bench.inference import token_batches
torch.manual_seed(0)
tok, m = load_minilm(); m.eval()
cal = token_batches(1, 128, 1000, 20000)
# real text for evaluation
text = open("/usr/share/common-licenses/GPL-3").read().split("\n\n")
sents = [t.strip().replace("\n", " ") for t in text if len(t.strip()) > 40][:60]
def emb(model, s):
    b = tok(s, return_tensors="pt", truncation=True, max_length=128)
    with torch.no_grad():
        h = model(**b).last_hidden_state
    return (h * b["attention_mask"][..., None]).sum(1) / b["attention_mask"].sum()
ref = [emb(m, s) for s in sents]
for kw in [dict(method="percentile"), dict(method="minmax"), dict(method="entropy"), dict(method="percentile", max_error=0.05)]:
    q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, **kw)
    cos = [torch.nn.functional.cosine_similarity(emb(q, s), r).item() for s, r in zip(sents, ref)]
    summ = zenith.quant.summary(q)
    worst = sorted(((l.error or 0, l.name) for l in summ.layers), reverse=True)[:3]
    print(kw, "min cos %.4f mean %.4f" % (min(cos), sum(cos)/len(cos)), "kept", len(summ.kept), "worst", [(n, round(e,3)) for e, n in worst])
