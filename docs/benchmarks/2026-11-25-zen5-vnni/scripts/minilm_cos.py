# all-MiniLM-L6-v2 sentence embeddings (mean pooled, normalised) of 100 GPL-3 sentences:
# eager fp32 vs Zenith int8 (zenith.quantize + torch.compile); min cosine and the rank
# agreement of the 4950 pairwise similarities.
import copy, re, sys, torch, zenith
from zenith.demo import load_minilm
torch.set_num_threads(2)
text = open("/usr/share/common-licenses/GPL-3").read()
sents = [s.strip().replace("\n", " ") for s in re.split(r"(?<=[.;:])\s+", text)]
sents = [re.sub(r"\s+", " ", s) for s in sents if len(s.split()) >= 6][:100]
assert len(sents) == 100
tok, model = load_minilm()
model.eval()
batch = tok(sents, padding=True, truncation=True, max_length=128, return_tensors="pt")
def embed(m):
    with torch.no_grad():
        h = m(batch["input_ids"], batch["attention_mask"])[0]
    mask = batch["attention_mask"].unsqueeze(-1).float()
    e = (h * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(e, dim=-1)
ref = embed(model)
scheme = sys.argv[1] if len(sys.argv) > 1 else "int8"
q = torch.compile(zenith.quantize(copy.deepcopy(model), scheme), backend="zenith")
got = embed(q)
cos = (ref * got).sum(-1)
def ranks(v):
    return v.argsort().argsort().double()
iu = torch.triu_indices(100, 100, 1)
sr, sg = (ref @ ref.T)[iu[0], iu[1]], (got @ got.T)[iu[0], iu[1]]
rr, rg = ranks(sr), ranks(sg)
spearman = torch.corrcoef(torch.stack([rr, rg]))[0, 1].item()
print(f"{scheme}: {len(sents)} sentences, seq {batch['input_ids'].shape[1]}: min cosine {cos.min().item():.5f}, "
      f"mean {cos.mean().item():.5f}; pairwise similarity Spearman {spearman:.5f}, "
      f"max |similarity change| {(sr - sg).abs().max().item():.4f}")
