"""all-MiniLM-L6-v2 (real weights), ONNX Runtime int8-dynamic as zenith bench builds it (quantize_dynamic, QInt8
weights per channel; peers.onnxruntime_fn) and with reduce_range=True (7-bit weights, ORT's advice for AVX2
without VNNI), against fp32 eager on the 120 GPL-3 sentences of minilm_w7_cosine.py (each padded to 128 tokens,
mean-pooled): min / mean cosine, similarity order kept. Then paired rounds at s128 (2 threads) of the two ORT
variants with Zenith int8-dynamic (8-bit and linear_weight_bits=7, compiled) and Zenith fp32."""
import copy, os, re, statistics, tempfile, torch, zenith
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.quantization.shape_inference import quant_pre_process
from zenith.bench.stats import paired_rounds, paired_ratio_ci
from zenith.demo import load_minilm

torch.manual_seed(0); torch.set_num_threads(2)
tok, m = load_minilm(); m.eval()
text = open("/usr/share/common-licenses/GPL-3").read()
sents = [s.strip().replace("\n", " ") for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 6][:120]
batches = [tok(s, return_tensors="pt", padding="max_length", truncation=True, max_length=128) for s in sents]

class Hidden(torch.nn.Module):
    def __init__(self, m): super().__init__(); self.m = m
    def forward(self, ids, am): return self.m(input_ids=ids, attention_mask=am).last_hidden_state

def pool(h, am):
    mk = am[..., None].float()
    return torch.nn.functional.normalize((h * mk).sum(1) / mk.sum(1), dim=-1)

def embed(fn):
    with torch.no_grad():
        return torch.cat([pool(fn(b["input_ids"], b["attention_mask"]), b["attention_mask"]) for b in batches])

def report(name, ref, got):
    cos = (ref * got).sum(-1)
    iu = torch.triu_indices(len(sents), len(sents), 1)
    a, b = (ref @ ref.T)[iu[0], iu[1]], (got @ got.T)[iu[0], iu[1]]
    g = torch.Generator().manual_seed(0)
    i, j = torch.randint(0, len(a), (200000,), generator=g), torch.randint(0, len(a), (200000,), generator=g)
    keep = (torch.sign(a[i] - a[j]) == torch.sign(b[i] - b[j])).float().mean().item()
    print(f"{name}: min cosine {cos.min():.5f}, mean {cos.mean():.5f}, order kept {100 * keep:.2f}%", flush=True)

hm = Hidden(m).eval()
ex = (batches[0]["input_ids"], batches[0]["attention_mask"])
sessions = {}
with tempfile.TemporaryDirectory() as tmp:
    path, pre = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m.pre.onnx")
    with torch.no_grad():
        torch.onnx.export(hm, ex, path, input_names=["ids", "am"], dynamo=True, optimize=True, verbose=False)
    quant_pre_process(path, pre)
    for name, rr in (("onnxruntime:int8-dynamic", False), ("onnxruntime:int8-dynamic reduce_range", True)):
        q = os.path.join(tmp, f"q{int(rr)}.onnx")
        quantize_dynamic(pre, q, weight_type=QuantType.QInt8, per_channel=True, reduce_range=rr)
        so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sessions[name] = ort.InferenceSession(q, so, providers=["CPUExecutionProvider"])

def ort_fn(s):
    return lambda ids, am: torch.from_numpy(s.run(None, {"ids": ids.numpy(), "am": am.numpy()})[0])

ref = embed(hm)
fns = {k: ort_fn(s) for k, s in sessions.items()}
fns["zenith:int8-dynamic"] = torch.compile(Hidden(zenith.quantize(copy.deepcopy(m), "int8-dynamic")), backend="zenith")
fns["zenith:int8-dynamic-w7"] = torch.compile(Hidden(zenith.quantize(copy.deepcopy(m), "int8-dynamic", linear_weight_bits=7)), backend="zenith")
for k, f in fns.items():
    report(k, ref, embed(f))
fns["zenith"] = torch.compile(Hidden(copy.deepcopy(m)), backend="zenith")
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
with torch.no_grad():
    for f in fns.values():
        for _ in range(3): f(ids, am)
    ts = paired_rounds(fns, 30, ids, am)
print({k: round(statistics.median(t) * 1e3, 2) for k, t in ts.items()})
for k in fns:
    if k != "zenith":
        print(f"  {k} / zenith fp32 %.3f [%.3f, %.3f]" % paired_ratio_ci(ts["zenith"], ts[k]))
for z in ("zenith:int8-dynamic", "zenith:int8-dynamic-w7"):
    for o in ("onnxruntime:int8-dynamic", "onnxruntime:int8-dynamic reduce_range"):
        print(f"  {z} / {o} %.3f [%.3f, %.3f]" % paired_ratio_ci(ts[o], ts[z]))
