"""python actblock_sim.py [WQ: 127 (default) or 63]. Fake-quant simulation (PyTorch, fp32 arithmetic) of AVX2's int8-dynamic linear layers on all-MiniLM-L6-v2 (real
weights): weights per output channel, 8-bit symmetric (127 levels); activations per block of B values along K (or one
scale per row), codes within +-qmax (63: AVX2's 7-bit codes). 120 GPL-3 sentences padded to 128 tokens, mean-pooled,
against fp32: min / mean cosine and the share of similarity pairs-of-pairs kept in order (as minilm_w7_cosine.py).
The per-32 7-bit row should sit near the compiled kernels' measured 0.99832 (thirty-fifth session)."""
import re, torch
import torch.nn as nn
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(1)
tok, m = load_minilm(); m.eval()
text = open("/usr/share/common-licenses/GPL-3").read()
sents = [s.strip().replace("\n", " ") for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 6][:120]
batch = tok(sents, return_tensors="pt", padding="max_length", truncation=True, max_length=128)

def embed():
    with torch.no_grad():
        h = m(**batch).last_hidden_state
    mk = batch["attention_mask"][..., None].float()
    return torch.nn.functional.normalize((h * mk).sum(1) / mk.sum(1), dim=-1)

def fq_act(x, block, qmax):
    K = x.shape[-1]
    xs = x.reshape(-1, K)
    if block is None:
        xb = xs[:, None, :]
    else:
        xb = xs.reshape(xs.shape[0], K // block, block)
    amax = xb.abs().amax(-1, keepdim=True)
    s = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
    q = torch.clamp(torch.round(xb / s), -qmax, qmax)
    return (q * s).reshape(x.shape)

ref = embed()
lin = [mod for mod in m.modules() if isinstance(mod, nn.Linear)]
w_orig = [l.weight.data.clone() for l in lin]
import sys
WQ = int(sys.argv[1]) if len(sys.argv) > 1 else 127  # weight codes within +-WQ (63: linear_weight_bits=7)
for l in lin:  # weights per output channel
    s = l.weight.data.abs().amax(1, keepdim=True) / WQ
    l.weight.data = torch.clamp(torch.round(l.weight.data / s), -WQ, WQ) * s
orig_fwd = nn.Linear.forward
iu = torch.triu_indices(len(sents), len(sents), 1)
g = torch.Generator().manual_seed(0)
sr = ref @ ref.T
a = sr[iu[0], iu[1]]
i, j = torch.randint(0, len(a), (200000,), generator=g), torch.randint(0, len(a), (200000,), generator=g)
for block, qmax in (((32, 63), (64, 63), (128, 63), (None, 63), (32, 127), (None, 127)) if WQ == 127 else ((32, 63), (64, 63))):
    nn.Linear.forward = lambda self, x, b=block, qm=qmax: orig_fwd(self, fq_act(x, b, qm))
    got = embed()
    nn.Linear.forward = orig_fwd
    cos = (ref * got).sum(-1)
    sg = got @ got.T
    b_ = sg[iu[0], iu[1]]
    keep = (torch.sign(a[i] - a[j]) == torch.sign(b_[i] - b_[j])).float().mean().item()
    print(f"weights +-{WQ}, act block {block or 'row'}, codes +-{qmax}: min cosine {cos.min():.5f}, mean {cos.mean():.5f}, "
          f"1 - mean {1 - cos.mean():.2e}, order kept {100 * keep:.2f}%", flush=True)
