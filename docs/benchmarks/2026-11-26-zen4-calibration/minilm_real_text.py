"""MiniLM static INT8 on real text: calibrated on 100 paragraphs of the licenses in
/usr/share/common-licenses other than GPL-3, evaluated on 60 GPL-3 paragraphs (mean-pooled
embeddings, cosine against fp32; compiled: the first 10). Each calibration method without
smoothing, then with smooth= (SmoothQuant alpha), then the int8 scheme."""
import copy, glob, time, torch, zenith
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
tok, m = load_minilm(); m.eval()
def paras(path):
    t = open(path, errors="ignore").read().split("\n\n")
    return [p.strip().replace("\n", " ") for p in t if len(p.strip()) > 80]
cal_text = [p for f in sorted(glob.glob("/usr/share/common-licenses/*")) if "GPL-3" not in f for p in paras(f)][:100]
calib = [dict(tok(p, return_tensors="pt", truncation=True, max_length=128)) for p in cal_text]
sents = paras("/usr/share/common-licenses/GPL-3")[:60]
def emb(model, s):
    b = tok(s, return_tensors="pt", truncation=True, max_length=128)
    with torch.no_grad():
        h = model(**b).last_hidden_state
    return (h * b["attention_mask"][..., None]).sum(1) / b["attention_mask"].sum()
ref = [emb(m, s) for s in sents]
def report(name, q, seconds):
    cos = [torch.nn.functional.cosine_similarity(emb(q, s), r).item() for s, r in zip(sents, ref)]
    torch._dynamo.reset()  # each model's static scales are constants of its graph: a fresh cache per model
    c = torch.compile(q, backend="zenith")
    cc = [torch.nn.functional.cosine_similarity(emb(c, s), r).item() for s, r in zip(sents[:10], ref[:10])]
    print(f"{name}: quantize {seconds:.1f} s; min cos {min(cos):.4f} mean {sum(cos)/len(cos):.4f}; "
          f"compiled min cos (10) {min(cc):.4f}", flush=True)
runs = [dict(method=k) for k in ("percentile", "minmax", "entropy")] + [
    dict(method="minmax", smooth=0.85), dict(method="percentile", smooth=0.85), dict(method="minmax", smooth=0.7),
    dict(method="entropy", smooth=0.85)]
for kw in runs:
    t = time.perf_counter()
    q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=calib, **kw)
    report(f"int8-static {kw}", q, time.perf_counter() - t)
t = time.perf_counter()
q = zenith.quantize(copy.deepcopy(m), "int8")
report("int8 (per 32 values at run time)", q, time.perf_counter() - t)
