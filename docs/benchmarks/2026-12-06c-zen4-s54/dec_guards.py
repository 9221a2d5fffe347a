import torch, transformers, zenith, collections, re, sys, logging, io
torch.manual_seed(0); torch.set_num_threads(2)
c = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=22, num_attention_heads=32,
                             num_key_value_heads=4, vocab_size=1000)
m = transformers.LlamaForCausalLM(c).eval()
m.forward = zenith.compile(m.forward)
ids = torch.randint(0, 1000, (1, 16))
with torch.no_grad():
    m.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None)
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
code = m.forward._torchdynamo_orig_callable.__code__ if hasattr(m.forward, "_torchdynamo_orig_callable") else None
entries = _debug_get_cache_entry_list(code)
for e in entries:
    gm = e.guard_manager
    txt = str(gm) if hasattr(gm, "__str__") else ""
    cnt = collections.Counter(re.findall(r"([A-Z_]{5,})", txt))
    print(len(txt.splitlines()), cnt.most_common(12))
