# Calls of a frozen static-INT8 encoder (random init, BERT-base or all-MiniLM-L6-v2's config, seq 128, calibrated
# on 4 random batches as the bench does) for 12 s, for `perf record` over a profiling build (`make install-profiling`):
# python enc_perf.py bert|minilm [scheme]
import sys, time
import torch, transformers, zenith
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "minilm"
scheme = sys.argv[2] if len(sys.argv) > 2 else "int8-static"
cfg = (transformers.BertConfig() if name == "bert" else
       transformers.BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536))
m = transformers.BertModel(cfg).eval()
ids = torch.randint(0, cfg.vocab_size, (1, 128))
kw = {}
if scheme == "int8-static":
    kw = dict(calibration=[(torch.randint(0, cfg.vocab_size, (1, 128)),) for _ in range(4)], method="minmax", smooth=0.85)
if scheme != "fp32": zenith.quantize(m, scheme, **kw)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(ids)
    print("start", flush=True)
    t = time.perf_counter(); n = 0
    while time.perf_counter() - t < 12: f(ids); n += 1
print((time.perf_counter() - t) / n * 1e3, "ms a call")
