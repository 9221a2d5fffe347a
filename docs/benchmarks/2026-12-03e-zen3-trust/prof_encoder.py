# perf driver: python prof_encoder.py [minilm|bert] [int8-dynamic|fp32] [compile|freeze] SECONDS; run under
# `perf record -F 1999 -g` after `make install-profiling`, then `perf report --time 55%-95% --no-children --sort pid,sym`.
import sys, copy, time, torch, zenith
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
name, scheme, mode = (sys.argv[1:] + ["minilm", "int8-dynamic", "compile"][len(sys.argv) - 1:])[:3]
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
q = m if scheme == "fp32" else zenith.quantize(copy.deepcopy(m), scheme)
q = zenith.freeze(q) if mode == "freeze" else torch.compile(q, backend="zenith")
with torch.no_grad():
    for _ in range(5): q(ids, am)
    t = time.perf_counter(); n = 0
    while time.perf_counter() - t < float(sys.argv[4] if len(sys.argv) > 4 else 20): q(ids, am); n += 1
print(f"{n} calls, {1e3 * (time.perf_counter() - t) / n:.2f} ms each", file=sys.stderr)
