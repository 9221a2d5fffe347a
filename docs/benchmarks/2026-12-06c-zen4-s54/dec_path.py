import torch, transformers, zenith, time, statistics
from zenith.backend import collect_reports
torch.manual_seed(0); torch.set_num_threads(2)
c = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
m = transformers.LlamaForCausalLM(c).eval()
m.forward = zenith.compile(m.forward)
ids = torch.randint(0, 1000, (1, 16))
with collect_reports() as sink, torch.no_grad():
    out = m.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
for r in sink:
    print(r.aten_trace, r.nodes_total, r.nodes_native, dict(list(r.fallback_ops.items())[:5]))
