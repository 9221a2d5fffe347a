"""Training through torch.compile(backend="zenith") against eager: forward values and
the gradients of inputs and parameters, over ops and layouts a joint graph can get
wrong (channels_last, views, in-place ops, dropout-free norms, attention, reductions,
indexing with repeats, integer side inputs, a parameter used twice)."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import zenith

torch.manual_seed(0)


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(torch.tanh(self.lin(x))).sum(-1)


cases = {
    "mlp gelu": (nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 3)), lambda: (torch.randn(5, 12),)),
    "conv bn relu pool (train BN)": (nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                                                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 2)),
                                     lambda: (torch.randn(2, 3, 8, 8),)),
    "conv channels_last": (nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 4, 1)),
                           lambda: (torch.randn(2, 3, 7, 9).to(memory_format=torch.channels_last),)),
    "depthwise + strided": (nn.Sequential(nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4), nn.Hardswish(),
                                          nn.Conv2d(4, 8, 1)), lambda: (torch.randn(2, 4, 9, 9),)),
    "layernorm + attention": (nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
                              lambda: (torch.randn(2, 7, 16),)),
    "parameter used twice": (Twice(), lambda: (torch.randn(4, 8),)),
    "embedding with repeats": (nn.Sequential(nn.Embedding(10, 6), nn.Flatten(), nn.Linear(18, 2)),
                               lambda: (torch.tensor([[1, 1, 3], [3, 9, 1]]),)),
    "log_softmax nll": (None, None),
    "maxpool ties": (nn.Sequential(nn.MaxPool2d(2), nn.Flatten()), lambda: (torch.ones(1, 2, 4, 4),)),
    "sdpa causal": (None, None),
}


def run_case(name, model, make, fn=None):
    torch._dynamo.reset()
    args = make()
    em = model
    cm = copy.deepcopy(model)
    ea = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    ca = [a.clone().requires_grad_(a.is_floating_point()) for a in args]
    compiled = torch.compile(cm, backend="zenith")
    g0 = zenith.stats()["graphs_compiled"]
    msgs = []
    for step in range(2):
        want = em(*ea)
        got = compiled(*ca)
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            msgs.append(f"step {step} forward differs by {(got - want).abs().max().item():.3g}")
        gw = torch.randn_like(want)
        want.backward(gw)
        got.backward(gw)
        for (pn, p), (_, q) in zip(em.named_parameters(), cm.named_parameters()):
            if (p.grad is None) != (q.grad is None) or (p.grad is not None and not torch.allclose(
                    q.grad, p.grad, rtol=1e-4, atol=1e-5)):
                d = None if p.grad is None or q.grad is None else (q.grad - p.grad).abs().max().item()
                msgs.append(f"step {step} grad of {pn} differs ({d})")
        for i, (a, b) in enumerate(zip(ea, ca)):
            if a.grad is not None and not torch.allclose(b.grad, a.grad, rtol=1e-4, atol=1e-5):
                msgs.append(f"step {step} grad of input {i} differs by {(b.grad - a.grad).abs().max().item():.3g}")
        for m in (em, cm):
            for p in m.parameters():
                p.grad = None
        for a in ea + ca:
            a.grad = None
        for (bn, b), (_, c) in zip(em.named_buffers(), cm.named_buffers()):
            if b.is_floating_point() and not torch.allclose(b, c, rtol=1e-4, atol=1e-5):
                msgs.append(f"buffer {bn} differs")
    native = zenith.stats()["graphs_compiled"] > g0
    print(f"{name:<32} {'ok' if not msgs else 'PROBLEM ' + '; '.join(msgs[:3])}  (zenith graphs: {native})",
          flush=True)
    return not msgs


class LSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x, y):
        return F.nll_loss(F.log_softmax(self.lin(x), -1), y)


class Causal(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum((-1, -2))


cases["log_softmax nll"] = (LSM(), lambda: (torch.randn(4, 6), torch.tensor([0, 4, 2, 2])))
cases["sdpa causal"] = (Causal(), lambda: (torch.randn(2, 5, 8),))
ok = sum(run_case(n, m.train(), mk) for n, (m, mk) in cases.items())
print(f"{len(cases)} cases, {len(cases) - ok} with problems")
