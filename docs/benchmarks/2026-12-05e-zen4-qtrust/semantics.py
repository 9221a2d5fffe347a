"""torch.compile(backend="zenith") against eager on the semantics a backend can get wrong:
inputs mutated in place, buffers mutated, outputs that are views or aliases of inputs,
non-contiguous and channels_last inputs, storage offsets, one tensor passed twice,
low-precision dtypes, integer and bool inputs, Python scalars. Each case runs eagerly on
copies and compiled on copies; outputs, the inputs after the call, buffers, strides of
outputs and dtypes are compared."""
import copy
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

import zenith

torch.manual_seed(0)
results = []


def same(a, b, tol):
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.dtype != b.dtype or a.shape != b.shape:
            return f"dtype/shape {getattr(b, 'dtype', type(b))} {getattr(b, 'shape', '')} vs eager {a.dtype} {a.shape}"
        if a.is_floating_point():
            if not torch.allclose(a.float(), b.float(), rtol=tol, atol=tol, equal_nan=True):
                return f"values differ by {(a.float() - b.float()).abs().max().item():.3g}"
        elif not torch.equal(a, b):
            return "values differ"
        return None
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return "dict keys"
        return same(list(a.values()), list(b.values()), tol)
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return "length"
        for x, y in zip(a, b):
            r = same(x, y, tol)
            if r:
                return r
        return None
    return None if a == b else f"{b!r} vs eager {a!r}"


def case(name, fn, make_args, tol=1e-5, module=None, strides=False, calls=2):
    try:
        before = zenith.stats()
        torch._dynamo.reset()
        for call in range(calls):
            args = make_args()
            ea = copy.deepcopy(args)
            ca = copy.deepcopy(args)
            if module is not None:
                em = module
                cm_src = copy.deepcopy(module) if call == 0 else cm_src
                if call == 0:
                    compiled = torch.compile(cm_src, backend="zenith")
                want = em(*ea)
                got = compiled(*ca)
            else:
                if call == 0:
                    compiled = torch.compile(fn, backend="zenith")
                want = fn(*ea)
                got = compiled(*ca)
            err = same(want, got, tol)
            if err is None:
                err = same(list(ea), list(ca), tol)
                if err:
                    err = "inputs after the call: " + err
            if err is None and module is not None:
                err = same([b for b in em.state_dict().values()], [b for b in cm_src.state_dict().values()], tol)
                if err:
                    err = "module state after the call: " + err
            if err is None and strides and isinstance(want, torch.Tensor) and want.stride() != got.stride():
                err = f"strides {got.stride()} vs eager {want.stride()}"
            if err:
                break
        after = zenith.stats()
        native = after["graphs_compiled"] > before["graphs_compiled"]
        results.append((name, err, native))
    except Exception as e:
        results.append((name, f"raised {type(e).__name__}: {str(e).splitlines()[0][:200]}", None))


x4 = lambda: (torch.randn(4, 8),)

def mut_input(x):
    x.add_(1)
    return x * 2
case("mutates its input in place", mut_input, x4)

def mut_input_view(x):
    x[:, 0].mul_(3)
    return x.sum(1)
case("mutates a slice of its input", mut_input_view, x4)

def ret_input(x):
    return x
case("returns its input", ret_input, x4)

def ret_view(x):
    return x.t(), x[1], (x + 1).view(2, 16)
case("returns views of its input", ret_view, x4, strides=True)

def ret_same_twice(x):
    y = x.relu()
    return y, y
case("returns one tensor twice", ret_same_twice, x4)

def two_args(a, b):
    return a * 2 + b
t = torch.randn(4, 8)
case("one tensor passed twice", two_args, lambda: (t, t))

def aliased_mut(a, b):
    a.add_(1)
    return b * 2
def mk_alias():
    base = torch.randn(4, 8)
    return (base, base[1:])
case("mutates an input another aliases", aliased_mut, mk_alias)

case("non-contiguous input", lambda x: (x * 2).relu() + 1, lambda: (torch.randn(8, 10)[:, ::2],), strides=True)
case("transposed input", lambda x: x @ x.t() + 1, lambda: (torch.randn(10, 6).t(),))
case("storage offset input", lambda x: x.softmax(-1), lambda: (torch.randn(100)[7:87].view(8, 10),))
case("expanded (stride 0) input", lambda x: (x * 3).sum(0), lambda: (torch.randn(1, 8).expand(5, 8),))
case("channels_last conv", None, lambda: (torch.randn(2, 3, 16, 16).to(memory_format=torch.channels_last),),
     module=nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1)).eval(), tol=1e-4, strides=True)
case("channels_last elementwise keeps its strides", lambda x: x * 2 + 1,
     lambda: (torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),), strides=True)

class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros(()))
        self.lin = nn.Linear(8, 8)
    def forward(self, x):
        self.n += 1
        return self.lin(x) * self.n
case("mutates a buffer", None, x4, module=Counter(), calls=3)

bn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
case("BatchNorm in train mode (running stats)", None, lambda: (torch.randn(2, 3, 8, 8),), module=bn, tol=1e-4)

case("float16 input", lambda x: (x * 2).sigmoid() @ x.t(), lambda: (torch.randn(6, 8).half(),), tol=2e-3)
case("bfloat16 linear", None, lambda: (torch.randn(3, 16).bfloat16(),), module=nn.Linear(16, 8).bfloat16(), tol=2e-2)
case("float64 input", lambda x: (x.exp() - 1).sum(-1), lambda: (torch.randn(4, 8).double(),), tol=1e-12)
case("int64 input", lambda x: (x * 3 + 1) // 2, lambda: (torch.randint(-50, 50, (4, 8)),))
case("bool mask", lambda x, m: x.masked_fill(m, -1.0), lambda: (torch.randn(4, 8), torch.rand(4, 8) > 0.5))
case("int32 index", lambda x, i: x[i], lambda: (torch.randn(10, 4), torch.tensor([3, 1, 9], dtype=torch.int32)))
case("python float argument", lambda x, s: x * s + s, lambda: (torch.randn(4, 8), 2.5))
case("python int argument changing", lambda x, n: x[:n] * 2, lambda: (torch.randn(6, 3), int(torch.randint(1, 6, ()))),
     calls=4)
case("0-dim tensor input", lambda x, s: x * s, lambda: (torch.randn(4, 8), torch.tensor(3.0)))
case("grad mode, requires_grad input", lambda x: (x * 2).tanh(), lambda: (torch.randn(4, 8, requires_grad=True),))
case("out of place on a leaf that requires grad, no_grad", torch.no_grad()(lambda x: x.relu() * 2),
     lambda: (torch.randn(4, 8, requires_grad=True),))
case("complex input (visible fallback)", lambda x: x * x.conj(), lambda: (torch.randn(4, 4, dtype=torch.complex64),))
case("empty batch", lambda x: F.layer_norm(x, (8,)) * 2, lambda: (torch.randn(0, 8),))
case("scalar output", lambda x: x.sum(), x4)
case("tuple with None and int outputs", lambda x: (x * 2, None, 3), x4)
case("dict output", lambda x: {"a": x + 1, "b": x.shape[0]}, x4)
case("in-place on an intermediate then returned", lambda x: torch.relu_(x * 2).add_(1), x4)
case("out= variant", lambda x, o: torch.add(x, 1, out=o), lambda: (torch.randn(4, 8), torch.empty(4, 8)))
case("resize via out=", lambda x, o: torch.mul(x, 2, out=o), lambda: (torch.randn(4, 8), torch.empty(0)))
case("copy_ into input", lambda x, y: x.copy_(y * 2), lambda: (torch.randn(4, 8), torch.randn(4, 8)))
case("setitem with a mask", lambda x: x.__setitem__(x < 0, 0.0) or x, x4)
case("inplace on input then view returned", lambda x: x.mul_(2).view(-1), x4)

width = max(len(n) for n, *_ in results)
bad = 0
for name, err, native in results:
    bad += err is not None
    print(f"{name:<{width}}  {'ok' if err is None else 'PROBLEM: ' + err}  ({'native graph' if native else 'no Zenith graph' if native is False else '?'})")
print(f"{len(results)} cases, {bad} problems")
