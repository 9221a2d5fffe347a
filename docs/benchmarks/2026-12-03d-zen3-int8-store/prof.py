import sys, copy, torch, zenith, collections
from transformers import BertConfig, BertModel
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "minilm"
scheme = sys.argv[2] if len(sys.argv) > 2 else "int8-dynamic"
m = load_minilm()[1] if name == "minilm" else BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
q = zenith.freeze(m if scheme == "fp32" else zenith.quantize(copy.deepcopy(m), scheme))
with torch.no_grad():
    for _ in range(5): q(ids, am)
    with zenith.profile() as p:
        for _ in range(10): q(ids, am)
print(p)
