"""More torch.compile usage against eager: inference_mode, autocast to bfloat16,
activation checkpointing in training, deepcopy and pickling of a compiled module's
state, a model moved to float64 after compiling, and hooks."""
import copy
import io
import warnings

import torch
import torch.nn as nn
import torch.utils.checkpoint as ckpt

import zenith

warnings.filterwarnings("ignore")
torch.manual_seed(0)
out = []


def check(name, fn):
    torch._dynamo.reset()
    try:
        msg = fn()
    except Exception as e:
        msg = f"raised {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    out.append((name, msg))
    print(f"{name:<44} {'ok' if msg is None else 'PROBLEM ' + msg}", flush=True)


mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).eval()
x = torch.randn(4, 16)


def inference_mode():
    c = torch.compile(mlp, backend="zenith")
    with torch.inference_mode():
        xi = torch.randn(4, 16)
        got, want = c(xi), mlp(xi)
    return None if torch.allclose(got, want, atol=1e-5) else "differs"


def autocast_bf16():
    c = torch.compile(mlp, backend="zenith")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = c(x), mlp(x)
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} vs {want.dtype}"
    return None if torch.allclose(got.float(), want.float(), atol=3e-2, rtol=3e-2) else \
        f"differs by {(got.float() - want.float()).abs().max().item():.3g}"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        return ckpt.checkpoint(lambda t: self.b(torch.tanh(self.a(t))), x, use_reentrant=False).sum()


def checkpointing():
    m = Block()
    cm = copy.deepcopy(m)
    c = torch.compile(cm, backend="zenith")
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    m(xa).backward()
    c(xb).backward()
    for (n, p), q in zip(m.named_parameters(), cm.parameters()):
        if not torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-4):
            return f"grad of {n} differs"
    return None if torch.allclose(xa.grad, xb.grad, atol=1e-5) else "input grad differs"


def deepcopy_compiled():
    c = torch.compile(copy.deepcopy(mlp), backend="zenith")
    with torch.no_grad():
        c(x)
        d = copy.deepcopy(c)
        with torch.no_grad():
            for p in d.parameters():
                p.mul_(2)
        got_c, got_d = c(x), d(x)
    want_d = nn.Sequential(*[copy.deepcopy(l) for l in mlp])
    with torch.no_grad():
        for p in want_d.parameters():
            p.mul_(2)
        if not torch.allclose(got_c, mlp(x), atol=1e-5):
            return "the original changed"
        return None if torch.allclose(got_d, want_d(x), atol=1e-5) else "the copy runs the old weights"


def state_dict_roundtrip():
    c = torch.compile(copy.deepcopy(mlp), backend="zenith")
    with torch.no_grad():
        c(x)
        buf = io.BytesIO()
        torch.save(c.state_dict(), buf)
        buf.seek(0)
        fresh = copy.deepcopy(mlp)
        for p in fresh.parameters():
            p.data.zero_()
        fresh.load_state_dict({k.replace("_orig_mod.", ""): v for k, v in torch.load(buf).items()})
        return None if torch.allclose(fresh(x), mlp(x)) else "differs"


def to_double_after_compile():
    m = copy.deepcopy(mlp)
    c = torch.compile(m, backend="zenith")
    with torch.no_grad():
        c(x)
        m.double()
        got = c(x.double())
        want = mlp.double()(x.double())
        mlp.float()
    if got.dtype != torch.float64:
        return f"dtype {got.dtype}"
    return None if torch.allclose(got, want, atol=1e-10) else "differs"


def forward_hook():
    m = copy.deepcopy(mlp)
    seen = []
    m[1].register_forward_hook(lambda mod, i, o: seen.append(o.shape))
    c = torch.compile(m, backend="zenith")
    with torch.no_grad():
        got = c(x)
    if not seen:
        return "the hook did not run"
    return None if torch.allclose(got, mlp(x), atol=1e-5) else "differs"


def weight_update_between_calls():
    m = copy.deepcopy(mlp).train()
    c = torch.compile(m, backend="zenith")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    ref = copy.deepcopy(mlp).train()
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        for mod, o in ((c, opt), (ref, ropt)):
            o.zero_grad()
            mod(x).pow(2).mean().backward()
            o.step()
    with torch.no_grad():
        return None if torch.allclose(c(x), ref(x), atol=1e-5) else "differs after 3 SGD steps"


for name, fn in [("inference_mode tensors", inference_mode), ("autocast bfloat16", autocast_bf16),
                 ("activation checkpointing (training)", checkpointing), ("deepcopy of a compiled module", deepcopy_compiled),
                 ("state_dict save/load", state_dict_roundtrip), ("model.double() after compiling", to_double_after_compile),
                 ("forward hook", forward_hook), ("SGD steps between calls", weight_update_between_calls)]:
    check(name, fn)
print(f"{len(out)} cases, {sum(m is not None for _, m in out)} problems")
