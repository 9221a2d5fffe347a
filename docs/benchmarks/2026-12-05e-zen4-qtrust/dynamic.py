"""Dynamic shapes (dynamic=True) against eager: each function compiled once, then called
with many sizes (1, 2, odd, 0 where eager allows it, large), every answer compared."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import zenith

torch.manual_seed(0)
conv = nn.Conv2d(3, 5, 3, padding=1, stride=2).eval()
lin = nn.Linear(12, 7)
ln = nn.LayerNorm(12)
mha = nn.MultiheadAttention(12, 3, batch_first=True).eval()
cases = {
    "softmax rows": (lambda x: x.softmax(-1) * 2, lambda n: (torch.randn(n, 12),)),
    "layernorm+linear+gelu": (lambda x: F.gelu(lin(ln(x))), lambda n: (torch.randn(2, n, 12),)),
    "matmul n x n": (lambda a: a @ a.t() / 3, lambda n: (torch.randn(n, 12),)),
    "conv, dynamic H W": (lambda x: conv(x).relu(), lambda n: (torch.randn(1, 3, n, n + 3),)),
    "conv, dynamic batch": (lambda x: conv(x).sigmoid(), lambda n: (torch.randn(n, 3, 9, 8),)),
    "attention dynamic seq": (lambda x: mha(x, x, x, need_weights=False)[0], lambda n: (torch.randn(2, n, 12),)),
    "causal sdpa": (lambda q: F.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True),
                    lambda n: (torch.randn(1, 3, n, 8),)),
    "cat + slice by size": (lambda x: torch.cat([x, x[: x.shape[0] // 2]], 0).cumsum(0),
                            lambda n: (torch.randn(n, 5),)),
    "reshape -1 and expand": (lambda x: x.reshape(-1, 4).expand(3, -1, -1).sum(0),
                              lambda n: (torch.randn(n, 8),)),
    "index with arange": (lambda x: x[torch.arange(x.shape[0] - 1, -1, -1)] * 2, lambda n: (torch.randn(n, 3),)),
    "mean over dynamic dim": (lambda x: x.mean(1, keepdim=True) - x, lambda n: (torch.randn(3, n),)),
    "pad to multiple of 8": (lambda x: F.pad(x, (0, (8 - x.shape[-1] % 8) % 8)) + 1, lambda n: (torch.randn(2, n),)),
    "topk-free argmax": (lambda x: x.argmax(-1), lambda n: (torch.randn(4, n),)),
    "masked_fill by length": (lambda x: x.masked_fill(torch.arange(x.shape[1]) >= x.shape[1] - 2, -1e9).softmax(-1),
                              lambda n: (torch.randn(2, n),)),
}
sizes = [5, 2, 7, 33, 1, 64, 3, 129, 8, 0]
bad = 0
for name, (f, make) in cases.items():
    torch._dynamo.reset()
    c = torch.compile(f, backend="zenith", dynamic=True)
    g0 = zenith.stats()["graphs_compiled"]
    msgs = []
    for n in sizes:
        args = make(n)
        try:
            with torch.no_grad():
                want = f(*args)
        except Exception:
            continue  # eager refuses this size too
        try:
            with torch.no_grad():
                got = c(*args)
            if got.shape != want.shape or not torch.allclose(got.float(), want.float(), rtol=1e-4, atol=1e-5):
                msgs.append(f"n={n}: differs ({got.shape} vs {want.shape})")
        except Exception as e:
            msgs.append(f"n={n}: raised {type(e).__name__}: {str(e).splitlines()[0][:120]}")
    graphs = zenith.stats()["graphs_compiled"] - g0
    bad += bool(msgs)
    print(f"{name:<24} graphs {graphs:2d}  {'ok' if not msgs else 'PROBLEM ' + '; '.join(msgs)}")
print(f"{len(cases)} functions x {len(sizes)} sizes, {bad} with problems")
