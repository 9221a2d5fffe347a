# all-MiniLM-L6-v2 (real weights): sentence embeddings (mean pooled) of 200 lines of GPL-3
# under zenith.quantize "int4" at each group size, against fp32: min and mean cosine, and
# how many of the pairwise-similarity orderings of 50 sentences against the first stay the same.
import copy, torch, zenith
from zenith.demo import load_minilm
torch.set_num_threads(2)
tok, model = load_minilm()
lines = [l.strip() for l in open("/usr/share/common-licenses/GPL-3", encoding="utf-8") if len(l.strip()) > 40][:200]
enc = tok(lines, padding=True, truncation=True, max_length=128, return_tensors="pt")
def emb(m):
    with torch.no_grad():
        out = []
        for i in range(0, len(lines), 25):
            o = m(input_ids=enc.input_ids[i:i+25], attention_mask=enc.attention_mask[i:i+25]).last_hidden_state
            mask = enc.attention_mask[i:i+25, :, None].float()
            out.append((o * mask).sum(1) / mask.sum(1))
        return torch.nn.functional.normalize(torch.cat(out), dim=-1)
ref = emb(model)
rank_ref = (ref[:50] @ ref[0]).argsort()
for g, sym in ((32, True), (64, True), (128, True), (32, False), (128, False)):
    m = zenith.quantize(copy.deepcopy(model), "int4", group_size=g, symmetric=sym)
    e = emb(m)
    cos = (e * ref).sum(-1)
    same = (rank_ref == (e[:50] @ e[0]).argsort()).float().mean().item()
    print(f"int4 group {g:<3} {'sym ' if sym else 'asym'}: min cosine {cos.min():.4f}, mean {cos.mean():.5f}, "
          f"1 - mean {1 - cos.mean().item():.2e}, similarity order kept {same:.2f}")
