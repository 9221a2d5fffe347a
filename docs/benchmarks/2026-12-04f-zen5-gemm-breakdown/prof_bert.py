import sys, torch, zenith, transformers
torch.manual_seed(0); torch.set_num_threads(2)
cfg = transformers.BertConfig() if sys.argv[1] == "bert" else transformers.BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = transformers.BertModel(cfg).eval(); ids = torch.randint(0, 1000, (1, int(sys.argv[2])))
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 20): f(ids)
