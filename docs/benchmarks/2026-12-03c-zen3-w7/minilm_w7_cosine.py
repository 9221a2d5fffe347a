"""(2026-12-03: argv[2], linear_weight_bits, 7 or 8.) all-MiniLM-L6-v2 (real weights), zenith.quantize(m, SCHEME) compiled with Zenith, against
fp32 eager on 120 real-text inputs: the GPL-3 split into sentences of 6+ words, each padded
to 128 tokens (one shape, one compile; mean-pooled over the mask). Prints the min and mean
cosine, and the share of sentence pairs whose similarity order fp32 and int8 agree on.
Run as is and with ZENITH_NO_AVX512=1 (AVX2: 7-bit activation codes in the int8 GEMM).
argv[1]: the scheme (default int8; int8-dynamic: one activation scale per row)."""
import copy, re, sys, torch, zenith
from zenith import _C
from zenith.demo import load_minilm

torch.manual_seed(0)
torch.set_num_threads(2)
tok, m = load_minilm()
m.eval()
text = open("/usr/share/common-licenses/GPL-3").read()
sents = [s.strip().replace("\n", " ") for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 6][:120]
assert len(sents) == 120


def embed(model):
    out = []
    with torch.no_grad():
        for s in sents:
            b = tok(s, return_tensors="pt", padding="max_length", truncation=True, max_length=128)
            h = model(**b).last_hidden_state
            mk = b["attention_mask"][..., None].float()
            out.append(torch.nn.functional.normalize((h * mk).sum(1) / mk.sum(1), dim=-1))
    return torch.cat(out)


ref = embed(m)
SCHEME = sys.argv[1] if len(sys.argv) > 1 else "int8"
BITS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
q = zenith.quantize(copy.deepcopy(m), SCHEME, linear_weight_bits=BITS)
got = embed(torch.compile(q, backend="zenith"))
cos = (ref * got).sum(-1)
sr, sg = ref @ ref.T, got @ got.T
iu = torch.triu_indices(len(sents), len(sents), 1)
a, b = sr[iu[0], iu[1]], sg[iu[0], iu[1]]
# pairs of pairs: does int8 order every two similarities as fp32 does? (a sample of 200k)
g = torch.Generator().manual_seed(0)
i, j = torch.randint(0, len(a), (200000,), generator=g), torch.randint(0, len(a), (200000,), generator=g)
keep = (torch.sign(a[i] - a[j]) == torch.sign(b[i] - b[j])).float().mean().item()
print(f"{SCHEME}, linear_weight_bits {BITS}, qmatmul ISA {_C.qmatmul_isa('int8')}: {len(sents)} sentences, min cosine {cos.min().item():.5f}, "
      f"mean {cos.mean().item():.5f}; similarity order kept for {100 * keep:.2f}% of 200k pairs of pairs")
