import copy, torch, transformers, zenith, warnings, logging
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
c = tinyllama_config(); c.num_hidden_layers = 2
base = transformers.LlamaForCausalLM(c).eval()
ids = torch.randint(0, 32000, (1, 16))
kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None)
ms_all = [copy.deepcopy(base), zenith.quantize(copy.deepcopy(base), "int8"), zenith.quantize(copy.deepcopy(base), "int4"),
      zenith.quantize(copy.deepcopy(base), "int4", group_size=128)]
import sys
ms = ms_all[:int(sys.argv[1])]
for m in ms:
    m.forward = zenith.compile(m.forward)
with torch.no_grad():
    for i, m in enumerate(ms):
        before = zenith.stats()["calls"] if hasattr(zenith, "stats") else None
        m.generate(ids, **kw)
        print(i, "ok")
from torch._dynamo.utils import counters
print({k: dict(v) for k, v in counters.items() if k in ("stats", "recompiles", "frames")})
