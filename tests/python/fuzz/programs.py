"""Random programs for differential fuzzing: Zenith against eager, float64 as the arbiter.

A program is a list of graph inputs (shape, dtype, layout, value recipe) and a list of
steps, each an op from OPS applied to earlier values. `draw_program` builds one from a
Hypothesis `data` object, so Hypothesis replays and shrinks failures; every step is
validated on meta tensors while it is drawn, so the programs it keeps are valid PyTorch.
`run_case` traces a program to ATen (as the backend does), compiles it with Zenith
(passes and the verifier on), runs it, and judges the outputs (`judge`).

Besides single ops the generator emits motifs that the fusion passes look for (linear or
conv + activation, conv + batch-norm + residual, residual + layer_norm, the attention
permutes, duplicated steps for CSE, constant subexpressions, x*1 / x-0) and returns
views and inputs, so every pass and the memory planner see fuzzed graphs (COUNTS).

Discontinuous ops (comparisons, floor, argmax, remainder, float->int casts...) only take
values computed exactly from the inputs (`Val.exact`): a rounding difference upstream
would flip them and prove nothing.
"""
from __future__ import annotations

import collections
import math
import os
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from zenith.importer import decomposition_table
from zenith.partition import CompiledGraph

f32, f16, bf16, i64, i32, b8 = torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool
FLOATS = (f32, f16, bf16)
INTS = (i64, i32)

# Hits per fusion pass and planner case over every program run (printed by the CI test).
COUNTS = collections.Counter()


@dataclass
class Val:
    shape: tuple
    dtype: torch.dtype
    exact: bool  # computed from the inputs by exact ops only (movement, sign, max/min, compare...)


@dataclass
class Input:
    shape: tuple
    dtype: torch.dtype
    layout: str  # "contig" | "t" (transposed view) | "step" (every other element of the last dim) | "cl" (4-D
    # channels_last: the runtime's outputs must come back in eager's strides)
    special: float  # fraction of float elements replaced by inf/nan/-0/denormal/huge
    lo: float = -3.0
    hi: float = 3.0
    positive: bool = False


@dataclass
class Step:
    op: str
    args: tuple  # value indices
    params: dict = field(default_factory=dict)

    def __repr__(self):
        return f"Step({self.op!r}, {self.args}, {self.params})"


@dataclass
class Program:
    inputs: list
    steps: list
    outputs: list
    seed: int

    def __repr__(self):
        ins = ",\n    ".join(repr(i) for i in self.inputs)
        st = ",\n    ".join(repr(s) for s in self.steps)
        return f"Program(inputs=[\n    {ins}],\n  steps=[\n    {st}],\n  outputs={self.outputs}, seed={self.seed})"


# ---------------------------------------------------------------- the ops
def _act(name):
    return {
        "relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu, "tanh": torch.tanh, "relu6": F.relu6, "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid, "sigmoid": torch.sigmoid,
    }[name]


ACTS = ["relu", "gelu", "gelu_tanh", "silu", "tanh", "relu6", "hardswish", "hardsigmoid"]


def _linear_act(x, w, b, act):
    return _act(act)(F.linear(x, w, b)) if act else F.linear(x, w, b)


def _conv_block(x, w, b, bn_w, bn_b, mean, var, res, p):
    y = F.conv2d(x, w, b, stride=p["stride"], padding=p["padding"], dilation=p["dilation"], groups=p["groups"])
    if bn_w is not None:
        y = F.batch_norm(y, mean, var, bn_w, bn_b, training=False, eps=1e-5)
    if res is not None:
        y = y + res
    return _act(p["act"])(y) if p["act"] else y


def _attention(q, k, v, mask, p):
    B, L, _ = q.shape
    H = p["heads"]
    Lk = k.shape[1]
    qh = q.view(B, L, H, -1).permute(0, 2, 1, 3)
    kh = k.view(B, Lk, H, -1).permute(0, 2, 1, 3)
    vh = v.view(B, Lk, H, -1).permute(0, 2, 1, 3)
    if q.dtype == torch.float64:  # the arbiter: softmax(q k^T / sqrt(E) + mask) v written out
        o = _attention_math(qh, kh, vh, mask, p["causal"])
    else:
        o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, is_causal=p["causal"])
    return o.permute(0, 2, 1, 3).reshape(B, L, -1)


F32_MAX = torch.finfo(torch.float32).max
_F64_OVERFLOW = [False]  # set by a float64 step whose float32 counterpart overflows inside


def _attention_math(q, k, v, mask, causal):
    """Attention by its definition, for the float64 arbiter. PyTorch's CPU sdpa kernel
    (flash attention, used for float64 too) returns 0 for a query whose scores hold a
    NaN; by the definition, and in Zenith, that row is NaN."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if bool((s.abs() > F32_MAX).any()):  # float32 scores overflowed: no float64 verdict
        _F64_OVERFLOW[0] = True
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, dim=-1) @ v


UNARY_FLOAT = {
    "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "softplus": F.softplus, "leaky_relu": F.leaky_relu, "elu": F.elu,
    "mish": F.mish,
}
UNARY_EXACT = {"neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "relu6": F.relu6,
               "hardtanh": F.hardtanh}
UNARY_DISC = {"floor": torch.floor, "ceil": torch.ceil, "isnan": torch.isnan, "logical_not": torch.logical_not,
              "sign": torch.sign}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
BINARY_EXACT = {"maximum": torch.maximum, "minimum": torch.minimum}
BINARY_DISC = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
               "remainder": torch.remainder, "floor_divide": torch.floor_divide,
               "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
               "logical_and": torch.logical_and, "logical_or": torch.logical_or}
REDUCE = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin}


def apply(step: Step, vals):
    """Runs one step on tensors (real, fake or meta)."""
    op, p = step.op, step.params
    a = [vals[i] for i in step.args]
    if op in UNARY_FLOAT:
        return UNARY_FLOAT[op](a[0])
    if op in UNARY_EXACT:
        return UNARY_EXACT[op](a[0])
    if op in UNARY_DISC:
        return UNARY_DISC[op](a[0])
    if op in BINARY:
        return BINARY[op](a[0], a[1])
    if op in BINARY_EXACT:
        return BINARY_EXACT[op](a[0], a[1])
    if op in ("floor_divide", "div_trunc") and a[0].dtype == torch.float64:
        # the arbiter by definition: eager's fmod-based kernel gives NaN for inf // 0.2
        # and -1 for 0.5 // -inf, where floor(a / b) is inf and -0
        q = a[0] / a[1]
        return torch.floor(q) if op == "floor_divide" else torch.trunc(q)
    if op in BINARY_DISC:
        return BINARY_DISC[op](a[0], a[1])
    if op == "scalar_op":
        x = a[0]
        return {"add": x + p["c"], "mul": x * p["c"], "rsub": p["c"] - x, "div": x / p["c"],
                "pow": x ** p["c"], "rpow": p["c"] ** x}[p["kind"]]
    if op == "clamp":
        return torch.clamp(a[0], p.get("min"), p.get("max"))
    if op == "where":
        return torch.where(a[0], a[1], a[2])
    if op == "masked_fill":
        return a[0].masked_fill(a[1], p["value"])
    if op == "cast":  # the float64 arbiter stays in float64 through casts between float types
        if a[0].dtype == torch.float64 and p["dtype"] in FLOATS:
            return a[0]
        return a[0].to(p["dtype"])
    if op in REDUCE:
        return REDUCE[op](a[0], dim=p["dims"], keepdim=p["keepdim"]) if p["dims"] is not None else REDUCE[op](a[0])
    if op == "prod":
        return torch.prod(a[0], dim=p["dim"], keepdim=p["keepdim"])
    if op in ("any", "all"):
        f = torch.any if op == "any" else torch.all
        return f(a[0], dim=p["dim"], keepdim=p["keepdim"]) if p["dim"] is not None else f(a[0])
    if op == "argmax":
        return torch.argmax(a[0], dim=p["dim"], keepdim=p["keepdim"])
    if op == "max_dim":
        return torch.max(a[0], dim=p["dim"], keepdim=p["keepdim"])[p["which"]]
    if op == "cumsum":
        return torch.cumsum(a[0], dim=p["dim"])
    if op in ("softmax", "log_softmax"):
        return getattr(torch, op)(a[0], dim=p["dim"])
    if op == "logsumexp":
        return torch.logsumexp(a[0], dim=p["dim"])
    if op == "var_mean":
        if a[0].dtype == torch.float64:  # the arbiter, by definition: eager's kernel gives a NaN
            x = a[0]                      # mean for [inf, 1] (its running update subtracts inf - inf)
            n = x.shape[p["dim"]] if x.dim() else 1
            mean = x.sum(dim=p["dim"], keepdim=True) / n
            var = ((x - mean) ** 2).sum(dim=p["dim"]) / (n - 1) if n > 1 else torch.full_like(mean.sum(p["dim"]), math.nan)
            return (var, mean.squeeze(p["dim"]) if x.dim() else mean)[p["which"]]
        return torch.var_mean(a[0], dim=p["dim"])[p["which"]]
    if op == "layer_norm":
        x = a[0] if len(a) in (1, 3) else a[0] + a[3]
        w, b = (a[1], a[2]) if len(a) >= 3 else (None, None)
        if x.dtype == torch.float64 and x.numel():
            # A row whose float32 sum of squared deviations overflows (values near 1e30;
            # eager's kernel says NaN there) and whose spread is small against its values:
            # x - mean then keeps too few digits in any float32 implementation (two values
            # 1e27 apart at 3e30: 2e-4 of the result), so float64 cannot judge it. The mean's
            # float32 rounding, ~2^-24 max|x| / std of the output, reaches the tolerance (1e-5)
            # from max|x| > 2^7 std. Well-spread rows of 1e30 values stay judged (Zenith sums
            # in double: float64's answer). A row whose residual sum overflows float32 is unjudged too.
            dev = ((x - x.mean(dim=-1, keepdim=True)) ** 2).sum(dim=-1)
            ill = x.abs().amax(dim=-1) > 2**7 * (dev / x.shape[-1]).sqrt()
            if bool(((dev > F32_MAX) & ill).any()) or (len(a) == 4 and bool((x.abs() > F32_MAX).any())):
                _F64_OVERFLOW[0] = True
        return F.layer_norm(x, (x.shape[-1],), w, b, eps=p["eps"])
    if op == "rms_norm":
        return F.rms_norm(a[0], (a[0].shape[-1],), a[1], eps=1e-6)
    if op == "matmul":
        x, y = a[0], a[1]
        if p.get("ta"):
            x = x.transpose(-1, -2)
        if p.get("tb"):
            y = y.transpose(-1, -2)
        return torch.matmul(x, y)
    if op == "linear":
        return _linear_act(a[0], a[1], a[2] if len(a) > 2 else None, p["act"])
    if op == "addmm":
        return torch.addmm(a[0], a[1], a[2], beta=p["beta"], alpha=p["alpha"])
    if op == "conv":
        x, w = a[0], a[1]
        b = a[2] if p["bias"] else None
        k = 3 if p["bias"] else 2
        bn = a[k:k + 4] if p["bn"] else [None] * 4
        res = a[-1] if p["residual"] else None
        return _conv_block(x, w, b, *bn, res, p)
    if op == "attention":
        return _attention(a[0], a[1], a[2], a[3] if len(a) > 3 else None, p)
    if op == "max_pool2d":
        return F.max_pool2d(a[0], p["k"], p["s"], p["pad"], ceil_mode=p["ceil"])
    if op == "avg_pool2d":
        return F.avg_pool2d(a[0], p["k"], p["s"], p["pad"], ceil_mode=p["ceil"], count_include_pad=p["cip"])
    if op == "adaptive_avg_pool2d":
        return F.adaptive_avg_pool2d(a[0], p["out"])
    if op == "reshape":
        return a[0].reshape(p["shape"])
    if op == "permute":
        return a[0].permute(p["perm"])
    if op == "transpose":
        return a[0].transpose(p["d0"], p["d1"])
    if op == "expand":
        return a[0].expand(p["shape"])
    if op == "slice":
        return a[0].narrow(p["dim"], p["start"], p["len"]) if p["step"] == 1 else \
            a[0][(slice(None),) * p["dim"] + (slice(p["start"], None, p["step"]),)]
    if op == "select":
        return a[0].select(p["dim"], p["index"])
    if op == "cat":
        return torch.cat(a, dim=p["dim"])
    if op == "stack":
        return torch.stack(a, dim=p["dim"])
    if op == "pad":
        return F.pad(a[0], p["pad"], value=p["value"])
    if op == "split":
        return torch.split(a[0], p["size"], dim=p["dim"])[p["which"]]
    if op == "index_select":
        return torch.index_select(a[0], p["dim"], a[1])
    if op == "gather":
        return torch.gather(a[0], p["dim"], a[1])
    if op == "embedding":
        return F.embedding(a[1], a[0])
    if op == "tril":
        return torch.tril(a[0], p["diag"]) if not p["upper"] else torch.triu(a[0], p["diag"])
    if op == "clone":
        return a[0].clone()
    if op == "contiguous":
        return a[0].contiguous()
    if op == "unsqueeze":
        return a[0].unsqueeze(p["dim"])
    if op == "squeeze":
        return a[0].squeeze(p["dim"])
    if op == "flatten":
        return a[0].flatten()
    if op == "full_like":
        return torch.full_like(a[0], p["value"])
    if op == "const_expr":  # a subexpression of constants only: constant folding's food
        c = torch.arange(a[0].shape[-1], dtype=a[0].dtype) if a[0].dim() else torch.tensor(1.0, dtype=a[0].dtype)
        return a[0] + torch.cos(c * 0.5) * 2.0
    if op == "identity_arith":  # x * 1 - 0 and a transpose pair: canonicalize's food (x + 0 is not x at -0)
        return (a[0] * 1 - 0).transpose(-1, -2).transpose(-1, -2) if a[0].dim() >= 2 else a[0] * 1 - 0
    raise KeyError(op)


# ---------------------------------------------------------------- drawing
class Draw:
    """Choices from Hypothesis' data (so it can shrink them)."""

    def __init__(self, data):
        self.data = data

    def int(self, lo, hi):
        from hypothesis import strategies as st
        return self.data.draw(st.integers(lo, hi))

    def choice(self, xs):
        return xs[self.int(0, len(xs) - 1)]

    def coin(self, p_true=0.5):
        # integers shrink towards 0: 0 means False for small probabilities
        return self.int(0, 999) < int(p_true * 1000)


DIMS = [1, 2, 3, 4, 5, 7, 8, 16, 17, 0]


def _draw_shape(d, rank=None, allow_zero=True):
    rank = d.int(0, 4) if rank is None else rank
    dims = DIMS if allow_zero else DIMS[:-1]
    return tuple(d.choice(dims) if d.coin(0.9) else d.int(1, 40) for _ in range(rank))


class Builder:
    def __init__(self, d: Draw):
        self.d = d
        self.inputs: list[Input] = []
        self.vals: list[Val] = []
        self.metas: list[torch.Tensor] = []
        self.steps: list[Step] = []
        self.origin = []  # per value: ("in", input position) or ("step", step position)

    def finish(self, outputs):
        """The program with inputs first, then steps, as program_fn numbers values
        (inputs may have been added between steps while drawing)."""
        n_in = len(self.inputs)
        new = [k if kind == "in" else n_in + k for kind, k in self.origin]
        steps = [Step(s.op, tuple(new[a] for a in s.args), s.params) for s in self.steps]
        return steps, [new[o] for o in outputs]

    # values
    def add_input(self, shape, dtype, layout="contig", special=None, param=False, **kw):
        """A graph input; `param` marks weights and statistics, which get finite values
        (inf/nan are for activations: a NaN filter is not a program anyone runs)."""
        d = self.d
        if param:
            special = 0.0
        if special is None:
            special = 0.0 if (dtype not in FLOATS or not d.coin(0.25)) else d.choice([0.05, 0.2, 0.5])
        if layout == "contig" and len(shape) >= 2 and d.coin(0.15):
            layout = "t"
        elif layout == "contig" and len(shape) >= 1 and d.coin(0.1):
            layout = "step"
        elif layout == "contig" and len(shape) == 4 and d.coin(0.2):
            layout = "cl"
        self.inputs.append(Input(tuple(shape), dtype, layout, special, **kw))
        self.origin.append(("in", len(self.inputs) - 1))
        self.vals.append(Val(tuple(shape), dtype, exact=True))
        self.metas.append(torch.empty(shape, dtype=dtype, device="meta"))
        return len(self.vals) - 1

    def add_step(self, op, args, params=None):
        step = Step(op, tuple(args), params or {})
        try:
            out = apply(step, self.metas)
        except Exception:
            return None
        if not isinstance(out, torch.Tensor) or out.dtype not in (f32, f16, bf16, i64, i32, b8):
            return None
        if out.numel() > 200_000:
            return None
        exact = all(self.vals[i].exact for i in args) and op in EXACT_OPS
        self.steps.append(step)
        self.origin.append(("step", len(self.steps) - 1))
        self.vals.append(Val(tuple(out.shape), out.dtype, exact))
        self.metas.append(out)
        return len(self.vals) - 1

    def pick(self, pred=lambda v: True):
        idx = [i for i, v in enumerate(self.vals) if pred(v)]
        if not idx:
            return None
        # prefer recent values so programs chain rather than fan out
        return idx[-1 - min(self.d.int(0, 3), len(idx) - 1)] if self.d.coin(0.7) else self.d.choice(idx)

    def float_val(self, pred=lambda v: True):
        i = self.pick(lambda v: v.dtype in FLOATS and pred(v))
        if i is None:
            i = self.add_input(_draw_shape(self.d), self.d.choice([f32, f32, f32, f16, bf16]))
        return i

    def same_shape_partner(self, i, dtype=None, exact=False):
        v = self.vals[i]
        dtype = dtype or v.dtype
        d = self.d
        cands = [j for j, w in enumerate(self.vals) if j != i and w.dtype == dtype and (not exact or w.exact)
                 and _broadcastable(w.shape, v.shape)]
        if cands and d.coin(0.6):
            return d.choice(cands)
        # a fresh input: same shape, or a broadcast of it (trailing dims kept or set to 1)
        shape = list(v.shape)
        if shape and d.coin(0.4):
            k = d.int(0, len(shape))
            shape = [1 if d.coin(0.3) else s for s in shape[k:]]
        return self.add_input(tuple(shape), dtype)


def _broadcastable(a, b):
    """a broadcasts against b without growing b."""
    if len(a) > len(b):
        return False
    return all(x == y or x == 1 for x, y in zip(reversed(a), reversed(b)))


EXACT_OPS = set(UNARY_EXACT) | set(BINARY_EXACT) | set(UNARY_DISC) | set(BINARY_DISC) - {"remainder", "floor_divide",
                                                                                        "div_trunc"} | {
    "clamp", "where", "masked_fill", "amax", "amin", "any", "all", "argmax", "max_dim", "reshape", "permute",
    "transpose", "expand", "slice", "select", "cat", "stack", "pad", "split", "index_select", "gather",
    "embedding", "tril", "clone", "contiguous", "unsqueeze", "squeeze", "flatten", "full_like", "max_pool2d",
    "identity_arith"}


def _gen_step(b: Builder):
    d = b.d
    kind = d.choice(["unary", "unary", "binary", "binary", "scalar", "reduce", "norm", "norm", "norm", "norm", "gemm",
                     "conv", "conv", "attention", "attention", "attention", "attention", "pool", "move", "move", "move",
                     "disc", "where", "cast", "source", "motif", "motif"])
    if kind == "unary":
        i = b.float_val()
        if d.coin(0.6):
            return b.add_step(d.choice(sorted(UNARY_FLOAT)), [i])
        return b.add_step(d.choice(sorted(UNARY_EXACT)), [b.pick() if d.coin(0.2) else i])
    if kind == "binary":
        i = b.pick(lambda v: v.dtype != b8) if d.coin(0.8) else b.float_val()
        if i is None:
            i = b.float_val()
        j = b.same_shape_partner(i)
        if d.coin(0.5):
            i, j = j, i
        op = d.choice(sorted(BINARY) + sorted(BINARY_EXACT))
        return b.add_step(op, [i, j])
    if kind == "scalar":
        i = b.float_val()
        k = d.choice(["add", "mul", "rsub", "div", "pow", "rpow"])
        c = d.choice([0.5, 2.0, -1.5, 3.0, 1e-3, 1e4]) if k != "pow" else d.choice([2.0, 0.5, 3.0, -1.0, 1.5])
        if k == "rpow":
            c = d.choice([2.0, 0.5, 1.5])
        return b.add_step("scalar_op", [i], {"kind": k, "c": c})
    if kind == "disc":
        i = b.pick(lambda v: v.exact)
        if i is None:
            return None
        if d.coin(0.4):
            return b.add_step(d.choice(sorted(UNARY_DISC)), [i])
        j = b.same_shape_partner(i, exact=True)
        return b.add_step(d.choice(sorted(BINARY_DISC)), [i, j])
    if kind == "where":
        c = b.pick(lambda v: v.dtype == b8)
        if c is None:
            c = b.add_input(_draw_shape(d), b8)
        x = b.float_val()
        y = b.same_shape_partner(x)
        if d.coin(0.3):
            return b.add_step("masked_fill", [x, c], {"value": d.choice([0.0, -1e9, float("-inf"), 2.5])})
        return b.add_step("where", [c, x, y])
    if kind == "cast":
        i = b.pick()
        v = b.vals[i]
        to = d.choice([f32, f16, bf16, i64, i32, b8])
        if to in INTS + (b8,) and v.dtype in FLOATS and not v.exact:
            to = f32  # float -> int or bool jumps at integers / at zero: exact values only
        if to in INTS and v.dtype in FLOATS and b.inputs and any(inp.special for inp in b.inputs):
            to = f32  # inf/nan -> int is undefined in C and in PyTorch
        return b.add_step("cast", [i], {"dtype": to})
    if kind == "reduce":
        i = b.pick(lambda v: v.dtype != b8)
        i = b.float_val() if i is None else i
        v = b.vals[i]
        r = len(v.shape)
        op = d.choice(["sum", "mean", "amax", "amin", "prod", "any", "all", "argmax", "max_dim", "cumsum", "softmax",
                       "log_softmax", "logsumexp", "var_mean"])
        if op in ("argmax", "max_dim") and not v.exact:
            op = "amax"
        if op in ("any", "all"):
            j = b.pick(lambda v: v.exact)  # (value 0 is a valid pick: no `or`)
            i = i if j is None else j
            r = len(b.vals[i].shape)
        keep = d.coin(0.3)
        if op in ("sum", "mean", "amax", "amin"):
            dims = None if (r == 0 or d.coin(0.2)) else sorted({d.int(-r, r - 1) % r for _ in range(d.int(1, r))})
            return b.add_step(op, [i], {"dims": dims, "keepdim": keep})
        dim = d.int(-max(r, 1), max(r, 1) - 1)
        if op in ("any", "all"):
            return b.add_step(op, [i], {"dim": None if d.coin(0.3) else dim, "keepdim": keep})
        if op in ("prod", "argmax", "max_dim"):
            return b.add_step(op, [i], {"dim": dim, "keepdim": keep, "which": d.int(0, 1)})
        if op == "var_mean":
            return b.add_step(op, [i], {"dim": dim, "which": d.int(0, 1)})
        return b.add_step(op, [i], {"dim": dim})
    if kind == "norm":
        i = b.float_val(lambda v: len(v.shape) >= 1 and (v.dtype == f32 or d.coin(0.2)))
        v = b.vals[i]
        n = v.shape[-1] if v.shape else 1
        if d.coin(0.2) and v.shape:
            w = b.add_input((n,), v.dtype, param=True)
            return b.add_step("rms_norm", [i, w])
        if d.coin(0.3):
            return b.add_step("layer_norm", [i], {"eps": 1e-5})
        w = b.add_input((n,), v.dtype, param=True)
        bb = b.add_input((n,), v.dtype, param=True)
        args = [i, w, bb]
        if d.coin(0.8):  # residual + norm
            args.append(b.same_shape_partner(i))
            if b.vals[args[3]].shape != v.shape:
                args[3] = b.add_input(v.shape, v.dtype)
        return b.add_step("layer_norm", args, {"eps": d.choice([1e-5, 1e-12])})
    if kind == "gemm":
        return _gen_gemm(b)
    if kind == "conv":
        return _gen_conv(b)
    if kind == "attention":
        return _gen_attention(b)
    if kind == "pool":
        i = b.float_val(lambda v: len(v.shape) == 4 and v.shape[2] >= 1 and v.shape[3] >= 1 and v.shape[1] >= 1)
        if len(b.vals[i].shape) != 4:
            i = b.add_input((d.choice([1, 2]), d.choice([1, 3, 8]), d.int(1, 12), d.int(1, 12)), f32)
        op = d.choice(["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"])
        if op == "adaptive_avg_pool2d":
            return b.add_step(op, [i], {"out": (d.int(1, 4), d.int(1, 4))})
        k = d.int(1, 3)
        return b.add_step(op, [i], {"k": k, "s": d.int(1, 2), "pad": d.int(0, k // 2), "ceil": d.coin(0.3),
                                    "cip": d.coin(0.5)})
    if kind == "move":
        return _gen_move(b)
    if kind == "source":
        i = b.pick()
        return b.add_step("full_like", [i], {"value": d.choice([0.0, 1.0, -2.5, 7.0])})
    if kind == "motif":
        m = d.choice(["dup", "const", "identity", "chain", "resnorm"])
        if m == "resnorm":  # a post-norm residual: layer_norm(x + r), the sum read by nothing else
            i = b.float_val(lambda v: v.dtype == f32 and len(v.shape) >= 1 and v.shape[-1] > 0)
            v = b.vals[i]
            if v.dtype != f32 or not v.shape:
                i = b.add_input((d.int(1, 4), d.choice([8, 16, 33])), f32)
                v = b.vals[i]
            n = v.shape[-1]
            return b.add_step("layer_norm", [i, b.add_input((n,), f32, param=True), b.add_input((n,), f32, param=True),
                                             b.add_input(v.shape, f32)], {"eps": 1e-5})
        if m == "dup":  # the same step twice: CSE merges them
            if not b.steps:
                return None
            s = b.steps[-1 - d.int(0, min(3, len(b.steps) - 1))]
            return b.add_step(s.op, list(s.args), dict(s.params))
        if m == "const":
            return b.add_step("const_expr", [b.float_val()])
        if m == "identity":
            return b.add_step("identity_arith", [b.float_val()])
        i = b.float_val()  # an elementwise chain
        for _ in range(d.int(2, 5)):
            nxt = b.add_step(d.choice(["exp", "tanh", "sigmoid", "silu", "neg", "abs", "relu", "sin"]), [i]) \
                if d.coin(0.5) else b.add_step(d.choice(["add", "mul", "sub", "maximum"]), [i, b.same_shape_partner(i)])
            if nxt is None:
                break
            i = nxt
        return i
    return None


def _gen_gemm(b: Builder):
    d = b.d
    m, k, n = d.choice([1, 2, 3, 5, 8, 17, 33]), d.choice([1, 3, 8, 16, 31, 64]), d.choice([1, 4, 7, 16, 40])
    dt = f32 if d.coin(0.85) else d.choice([f16, bf16])
    form = d.choice(["linear", "linear", "matmul", "addmm", "bmm"])
    x = b.pick(lambda v: v.dtype == dt and len(v.shape) in (2, 3) and v.shape[-1] > 0)
    if x is None or d.coin(0.3):
        x = b.add_input((m, k) if form != "bmm" and d.coin(0.6) else (d.int(1, 3), m, k), dt)
    k = b.vals[x].shape[-1]
    if form == "linear":
        w = b.add_input((n, k), dt, param=True)
        args = [x, w] + ([b.add_input((n,), dt, param=True)] if d.coin(0.7) else [])
        return b.add_step("linear", args, {"act": d.choice(ACTS + [None, None])})
    if form == "addmm":
        if len(b.vals[x].shape) != 2:
            x = b.add_input((m, k), dt)
        w = b.add_input((k, n), dt, param=True)
        bias = b.add_input(d.choice([(n,), (b.vals[x].shape[0], n), (1, n)]), dt, param=True)
        return b.add_step("addmm", [bias, x, w], {"beta": d.choice([1.0, 1.0, 0.5, 0.0]),
                                                 "alpha": d.choice([1.0, 1.0, 2.0])})
    tb = d.coin(0.3)
    shape_w = list(b.vals[x].shape[:-2]) if form == "bmm" and d.coin(0.5) else []
    shape_w += [n, k] if tb else [k, n]
    w = b.add_input(tuple(shape_w), dt, param=d.coin(0.7))
    return b.add_step("matmul", [x, w], {"tb": tb})


def _gen_conv(b: Builder):
    d = b.d
    x = b.pick(lambda v: v.dtype == f32 and len(v.shape) == 4 and min(v.shape) > 0 and v.shape[1] <= 64)
    if x is None or d.coin(0.3):
        x = b.add_input((d.choice([1, 1, 2]), d.choice([1, 3, 4, 8, 16, 64]), d.int(3, 16), d.int(3, 16)), f32)
    N, C, H, W = b.vals[x].shape
    kk = d.choice([1, 1, 3, 3, 5])
    groups = 1
    if d.coin(0.25):
        groups = C  # depthwise
    elif C % 2 == 0 and d.coin(0.15):
        groups = 2
    oc = d.choice([1, 4, 8, 16, 64]) if groups == 1 else groups * d.choice([1, 2])
    p = {"stride": d.choice([1, 1, 2]), "padding": d.choice([0, kk // 2, kk // 2]), "dilation": d.choice([1, 1, 2]),
         "groups": groups, "bias": d.coin(0.6), "bn": d.coin(0.5), "residual": False,
         "act": d.choice([None, "relu", "relu", "relu6", "hardswish", "silu"])}
    args = [x, b.add_input((oc, C // groups, kk, kk), f32, param=True)]
    if p["bias"]:
        args.append(b.add_input((oc,), f32, param=True))
    if p["bn"]:
        args.append(b.add_input((oc,), f32, param=True))
        args.append(b.add_input((oc,), f32, param=True))
        args.append(b.add_input((oc,), f32, param=True))
        args.append(b.add_input((oc,), f32, lo=0.1, hi=2.0, positive=True, param=True))
    try:
        meta = apply(Step("conv", tuple(args), {**p, "act": None}), b.metas)
    except Exception:  # the kernel does not fit the map: not a valid program
        return None
    if d.coin(0.5):
        p["residual"] = True
        args.append(b.add_input(tuple(meta.shape), f32))
    return b.add_step("conv", args, p)


def _gen_attention(b: Builder):
    d = b.d
    B, L, H, E = d.choice([1, 2]), d.choice([1, 3, 8, 17]), d.choice([1, 2, 4]), d.choice([4, 8, 16])
    Lk = L if d.coin(0.7) else d.choice([1, 5, 9])
    q = b.add_input((B, L, H * E), f32)
    k = b.add_input((B, Lk, H * E), f32)
    v = b.add_input((B, Lk, H * E), f32)
    p = {"heads": H, "causal": d.coin(0.3) and Lk == L}
    args = [q, k, v]
    if not p["causal"] and d.coin(0.4):
        if d.coin(0.5):
            args.append(b.add_input((1, 1, L, Lk), b8))
        else:
            args.append(b.add_input((B, 1, 1, Lk), f32))
    return b.add_step("attention", args, p)


def _gen_move(b: Builder):
    d = b.d
    i = b.pick()
    v = b.vals[i]
    r = len(v.shape)
    op = d.choice(["reshape", "permute", "transpose", "expand", "slice", "select", "cat", "stack", "pad", "split",
                   "index_select", "gather", "embedding", "tril", "clone", "contiguous", "unsqueeze", "squeeze",
                   "flatten"])
    if op == "reshape":
        n = math.prod(v.shape)
        shapes = [(n,), (1, n), (n, 1)] + ([(v.shape[0], -1)] if r >= 1 and v.shape[0] else []) + \
                 ([(-1, v.shape[-1])] if r >= 1 and v.shape[-1] else [])
        return b.add_step(op, [i], {"shape": d.choice(shapes)})
    if op == "permute" and r >= 2:
        perm = list(range(r))
        for _ in range(3):
            x, y = d.int(0, r - 1), d.int(0, r - 1)
            perm[x], perm[y] = perm[y], perm[x]
        return b.add_step(op, [i], {"perm": perm})
    if op == "transpose" and r >= 2:
        return b.add_step(op, [i], {"d0": d.int(-r, r - 1), "d1": d.int(-r, r - 1)})
    if op == "expand":
        shape = [d.choice([2, 3]) if s == 1 else s for s in v.shape]
        if d.coin(0.3):
            shape = [d.int(1, 3)] + shape
        return b.add_step(op, [i], {"shape": shape})
    if op == "slice" and r >= 1:
        dim = d.int(0, r - 1)
        size = v.shape[dim]
        start = d.int(0, max(size - 1, 0))
        step = d.choice([1, 1, 2, 3])
        return b.add_step(op, [i], {"dim": dim, "start": start, "len": d.int(0, size - start), "step": step})
    if op == "select" and r >= 1 and all(v.shape):
        dim = d.int(0, r - 1)
        return b.add_step(op, [i], {"dim": dim, "index": d.int(-v.shape[dim], v.shape[dim] - 1)})
    if op in ("cat", "stack"):
        j = b.pick(lambda w: w.dtype == v.dtype and w.shape == v.shape) if d.coin(0.5) else None
        if j is None:
            shape = list(v.shape)
            if op == "cat" and r and d.coin(0.5):
                shape[d.int(0, r - 1)] = d.choice([0, 1, 3])
            j = b.add_input(tuple(shape), v.dtype)
        dim = d.int(-max(r, 1), max(r, 1) - 1) if op == "cat" else d.int(-(r + 1), r)
        return b.add_step(op, [i, j] if d.coin(0.5) else [j, i, i], {"dim": dim})
    if op == "pad" and r >= 1:
        pad = [d.int(0, 2) for _ in range(2 * d.int(1, min(r, 2)))]
        return b.add_step(op, [i], {"pad": pad, "value": d.choice([0.0, 1.5, -1.0])})
    if op == "split" and r >= 1:
        dim = d.int(0, r - 1)
        size = max(1, d.int(1, max(v.shape[dim], 1)))
        return b.add_step(op, [i], {"dim": dim, "size": size, "which": d.int(0, max(0, -(-v.shape[dim] // size) - 1))})
    if op in ("index_select", "gather") and r >= 1:
        dim = d.int(0, r - 1)
        size = v.shape[dim]
        if size == 0:
            return None
        if op == "index_select":
            idx = b.add_input((d.int(0, 6),), i64, lo=0, hi=size)
            return b.add_step(op, [i, idx], {"dim": dim})
        shape = tuple(d.int(0, s) if k != dim else d.int(0, 5) for k, s in enumerate(v.shape))
        idx = b.add_input(shape, i64, lo=0, hi=size)
        return b.add_step(op, [i, idx], {"dim": dim})
    if op == "embedding":
        w = b.add_input((d.int(1, 20), d.choice([1, 4, 16])), d.choice([f32, f32, f16]), param=True)
        idx = b.add_input(_draw_shape(d, d.int(0, 2)), i64, lo=0, hi=b.inputs[-1].shape[0])
        return b.add_step(op, [w, idx])
    if op == "tril" and r >= 2:
        return b.add_step(op, [i], {"diag": d.int(-2, 2), "upper": d.coin(0.5)})
    if op in ("clone", "contiguous", "flatten"):
        return b.add_step(op, [i])
    if op == "unsqueeze":
        return b.add_step(op, [i], {"dim": d.int(-(r + 1), r)})
    if op == "squeeze" and r >= 1:
        return b.add_step(op, [i], {"dim": d.int(-r, r - 1)})
    return None


class RandomDraw(Draw):
    """Choices from a seeded random.Random (exploration scripts; no shrinking)."""

    def __init__(self, seed):
        import random
        self.rng = random.Random(seed)

    def int(self, lo, hi):
        return self.rng.randint(lo, hi)


def draw_program(data, max_steps=30):
    d = data if isinstance(data, Draw) else Draw(data)
    b = Builder(d)
    seed = d.int(0, 2**31 - 1)
    n_first = d.int(1, 3)
    for _ in range(n_first):
        b.add_input(_draw_shape(d), d.choice([f32, f32, f32, f32, f16, bf16, i64, i32, b8]))
    # one pattern a fusion pass looks for, drawn up front in most programs, so each pass
    # sees well over 100 graphs of a CI budget whatever the rest of the draw does
    lead = d.choice(["none", "conv", "conv", "attention", "resnorm", "gemm"])
    if lead == "conv":
        _gen_conv(b)
    elif lead == "attention":
        _gen_attention(b)
    elif lead == "gemm":
        _gen_gemm(b)
    elif lead == "resnorm":
        i = b.add_input((d.int(1, 4), d.choice([8, 16, 33])), f32)
        n = b.vals[i].shape[-1]
        b.add_step("layer_norm", [i, b.add_input((n,), f32, param=True), b.add_input((n,), f32, param=True),
                                  b.add_input(b.vals[i].shape, f32)], {"eps": 1e-5})
    target = d.int(1, max_steps)
    tries = 0
    while len(b.steps) < target and tries < target * 4:
        tries += 1
        _gen_step(b)
    if not b.steps:
        b.add_step("clone", [0])
    n_vals = len(b.vals)
    outs = [n_vals - 1]
    # more outputs: an intermediate, an input, or a view of an intermediate (the planner's cases)
    for _ in range(d.int(0, 2)):
        outs.append(d.int(0, n_vals - 1))
    if d.coin(0.25):  # a view of an intermediate returned beside it
        k = b.pick(lambda v: len(v.shape) >= 1)
        if k is not None:
            r = len(b.vals[k].shape)
            view = b.add_step("reshape", [k], {"shape": (-1,)}) if r == 1 or d.coin(0.5) else \
                b.add_step("transpose", [k], {"d0": 0, "d1": r - 1})
            if view is not None:
                outs += [view, k]
    steps, outs = b.finish(outs)
    return Program(b.inputs, steps, outs, seed)


def prune(prog: Program) -> Program:
    """The program without the steps and inputs no output depends on (shorter repros)."""
    n_in = len(prog.inputs)
    need = set(prog.outputs)
    for k in range(len(prog.steps) - 1, -1, -1):
        if n_in + k in need:
            need.update(prog.steps[k].args)
    keep_in = [i for i in range(n_in) if i in need]
    keep_st = [k for k in range(len(prog.steps)) if n_in + k in need]
    new = {old: j for j, old in enumerate(keep_in)}
    for j, k in enumerate(keep_st):
        new[n_in + k] = len(keep_in) + j
    steps = [Step(prog.steps[k].op, tuple(new[a] for a in prog.steps[k].args), prog.steps[k].params) for k in keep_st]
    # inputs keep their values: make_inputs draws every input in order, so dropped ones
    # would shift the others' random streams; a pruned program re-draws, which is fine
    # for a repro that is then checked to still fail
    return Program([prog.inputs[i] for i in keep_in], steps, [new[o] for o in prog.outputs], prog.seed)


# ---------------------------------------------------------------- running
SPECIALS = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0, 1e-40, 1e30, -1e30, 0.0])


def make_inputs(prog: Program):
    g = torch.Generator().manual_seed(prog.seed)
    out = []
    for inp in prog.inputs:
        shape = inp.shape
        if inp.layout == "t":
            shape = shape[:-2] + (shape[-1], shape[-2])
        elif inp.layout == "step":
            shape = shape[:-1] + (shape[-1] * 2,)
        if inp.dtype == b8:
            t = torch.rand(shape, generator=g) > 0.5
        elif inp.dtype in INTS:
            lo, hi = int(inp.lo), int(inp.hi) if inp.hi > inp.lo else int(inp.lo) + 1
            t = torch.randint(lo, max(hi, lo + 1), shape, generator=g, dtype=inp.dtype)
        else:
            t = torch.empty(shape).uniform_(inp.lo, inp.hi, generator=g)
            if inp.positive:
                t = t.abs() + 0.1
            if inp.special and t.numel():
                mask = torch.rand(shape, generator=g) < inp.special
                pick = torch.randint(0, len(SPECIALS), shape, generator=g)
                t = torch.where(mask, SPECIALS[pick], t)
            t = t.to(inp.dtype)
        if inp.layout == "t":
            t = t.transpose(-1, -2)
        elif inp.layout == "step":
            t = t[..., ::2]
        elif inp.layout == "cl":
            t = t.contiguous(memory_format=torch.channels_last)
        out.append(t)
    return out


def program_fn(prog: Program):
    def fn(*xs):
        vals = list(xs)
        for s in prog.steps:
            vals.append(apply(s, vals))
        return tuple(vals[i] for i in prog.outputs)

    return fn


TRACING_MODE = os.environ.get("ZENITH_FUZZ_TRACING", "real")
_DECOMP = decomposition_table()


def compile_program(prog: Program, inputs):
    fn = program_fn(prog)

    def wrapped(*args):
        return fn(*args)

    # "real" traces on the inputs themselves: about twice as fast as fake tensors for
    # these small graphs, and the graph (ATen ops, decompositions, meta) is the same.
    # functionalized, as the backend's direct trace is: decompositions' in-place ops
    # (add_ and friends) become functional ones
    gm = make_fx(torch.func.functionalize(wrapped), tracing_mode=TRACING_MODE, decomposition_table=_DECOMP)(*inputs)
    return CompiledGraph(gm, {"passes": True, "verify": True})


def _as64(t):
    return t.double() if t.dtype in FLOATS else t


TOL = {f32: (1e-4, 1e-5), f16: (1e-2, 1e-2), bf16: (8e-2, 5e-2)}


class Mismatch(AssertionError):
    pass


class Invalid(Exception):
    """Eager PyTorch rejects the program (a dtype an op has no kernel for, say): not a case."""


def judge(got, want, ref64, where, spread=None):
    """Zenith's output `got` against eager's `want`; where they differ beyond the dtype's
    tolerance, the float64 run `ref64` decides: Zenith must be at least about as close
    to it as eager is (per element), and NaN where float64 has a number is wrong."""
    if got.shape != want.shape or got.dtype != want.dtype:
        raise Mismatch(f"{where}: shape/dtype {tuple(got.shape)} {got.dtype} vs eager {tuple(want.shape)} {want.dtype}")
    if got.dtype not in FLOATS:
        if not torch.equal(got, want):
            bad = (got != want).nonzero()[:5].tolist()
            raise Mismatch(f"{where}: {got.dtype} values differ at {bad}")
        return
    rtol, atol = TOL[got.dtype]
    g, w, r = got.double(), want.double(), ref64.double() if ref64 is not None else None
    close = torch.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return
    if r is None or r.shape != g.shape:  # no float64 run (an op without a float64 kernel):
        # Zenith must stay within what eager's own nudged run moves by
        if spread is not None:
            allow = rtol * w.abs() + atol + 4 * spread.double().nan_to_num(math.inf, math.inf, math.inf)
            both_nan = g.isnan() & w.isnan()
            if bool((both_nan | ((g - w).abs() <= allow) | (g == w)).all()):
                return
        raise Mismatch(f"{where}: differs from eager and no float64 arbiter ({_describe(g, w, close)})")
    # the arbiter, element by element where Zenith and eager disagree
    bad = ~close
    gz, wz, rz = g[bad], w[bad], r[bad]
    zen_nan, eag_nan, ref_nan = gz.isnan(), wz.isnan(), rz.isnan()
    fine = torch.zeros_like(gz, dtype=torch.bool)
    fine |= zen_nan & ref_nan  # both exact and Zenith say NaN
    ok_num = ~zen_nan & ~ref_nan
    err_z = (gz - rz).abs()
    err_w = (wz - rz).abs()
    same_inf = torch.isinf(gz) & (gz == rz)
    tol_r = rtol * rz.abs() + atol
    if spread is not None:  # how far eager moves when its intermediates move by a few ulps
        tol_r = tol_r + 4 * spread.double()[bad].nan_to_num(math.inf, math.inf, math.inf)
    # where eager is NaN and float64 a number, Zenith's number must be float64's (within
    # tolerance): it is then the better one
    fine |= ok_num & (same_inf | (err_z <= torch.where(eag_nan, torch.zeros_like(err_w), 2 * err_w) + tol_r))
    if not bool(fine.all()):
        raise Mismatch(f"{where}: Zenith differs from eager and is not closer to float64 "
                       f"({_describe(g, w, close, r)})")


def _describe(g, w, close, r=None):
    idx = (~close).nonzero()[:3].tolist()
    parts = []
    for ix in idx:
        t = tuple(ix)
        parts.append(f"at {t}: zenith {g[t].item():.6g} eager {w[t].item():.6g}"
                     + (f" f64 {r[t].item():.6g}" if r is not None else ""))
    return f"{int((~close).sum())} of {g.numel()} elements; " + "; ".join(parts)


def run_case(prog: Program):
    """Compiles and runs one program; raises Mismatch (or the compile/run error) on a
    disagreement. Returns the CompiledGraph."""
    if CURRENT_FILE:  # a crash kills the process before Hypothesis can print the program
        with open(CURRENT_FILE, "w") as f:
            f.write(repr(prog) + "\n")
    inputs = make_inputs(prog)
    fn = program_fn(prog)
    with torch.no_grad():
        try:
            want = fn(*inputs)
        except Exception as e:
            COUNTS["invalid"] += 1
            raise Invalid(f"{type(e).__name__}: {e}") from e
        try:
            moved = [_run_nudged(prog, inputs, k) for k in range(NUDGES)]
        except Exception:
            moved = None
        cg = compile_program(prog, inputs)
        got = cg([x for x in inputs])
        ref64, overflowed = None, set()
        try:
            ref64, overflowed = _run64(prog, inputs)
        except Exception:  # an op without a float64 kernel, or dtype rules that change
            ref64 = None
    _count(cg, prog)
    got = list(got)
    unjudged = False
    if len(got) != len(want):
        raise Mismatch(f"{len(got)} outputs, eager has {len(want)}")
    for k, (gt, wt) in enumerate(zip(got, want)):
        if prog.outputs[k] in overflowed and gt.dtype in FLOATS:
            # float32 overflows on the way (1e30 * 1e30 in a dot product, say), or the
            # output is a sine of a huge rounded value: what each implementation lands
            # on depends on the order of its sums, and float64 cannot say which is
            # right. Counted (and printed by the CI test), not judged.
            if not unjudged:
                COUNTS["unjudged_ill_conditioned"] += 1  # graphs with such an output
            unjudged = True
            continue
        r = ref64[k] if ref64 is not None and ref64[k].shape == wt.shape else None
        spread = None
        if moved is not None and all(m[k].shape == wt.shape for m in moved) and wt.dtype in FLOATS:
            b_ = wt.double()
            for m in moved:
                a = m[k].double()
                one = torch.where(a.isnan() == b_.isnan(), (a - b_).abs().nan_to_num(0, math.inf, math.inf),
                                  torch.full_like(a, math.inf))
                spread = one if spread is None else torch.maximum(spread, one)
        judge(gt, wt, r, f"output {k} (value {prog.outputs[k]})", spread)
        if TRACING_MODE == "real" and gt.stride() != wt.stride() and _dense_not_contiguous(wt):
            raise Mismatch(f"output {k} (value {prog.outputs[k]}): strides {gt.stride()}, eager's {wt.stride()}")
    return cg


def _dense_not_contiguous(t):
    """Eager's output in a dense layout other than the contiguous one (channels_last, a
    permutation): Zenith's output must have the same strides (callpath._restride)."""
    if t.is_contiguous() or t.numel() == 0:
        return False
    expect = 1
    for st, sz in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if st != expect:
            return False
        expect *= sz
    return True


# independent nudged runs whose largest movement is the allowance: one run's random
# signs can cancel at an element (a 1600-term convolution output moved by 9e-7 where
# the median moved by 1e-4), and the judge then failed plain summation-order noise
NUDGES = 3


def _run_nudged(prog, inputs, k=0):
    """The program with its float inputs and every inexactly computed float value moved
    by about 8 ulps as it is made, as another implementation's rounding would move it. Where the outputs then
    move a lot (cancellation in a long sum, then log; x + 1e4 absorbing x, then a
    norm), the order of operations decides those digits, and the judge allows that much
    (`spread`). Exactly computed values are left alone, so comparisons of them do not
    flip (comparisons of inputs may: those outputs are compared exactly anyway)."""
    g = torch.Generator().manual_seed(prog.seed + 1 + 7919 * k)

    def nudge(t):  # float32 ulps whatever the dtype: half types' own ulps would allow 25%
        rel = 8 * torch.finfo(torch.float32).eps
        sign = torch.randint(0, 2, t.shape, generator=g) * 2 - 1
        return (t.float() * (1 + rel * sign)).to(t.dtype)

    # the inputs too: a long sum's rounding (a convolution's 200 terms cancelling to ~1)
    # shows as the output's movement when its terms move
    vals = [nudge(x) if x.dtype in FLOATS and x.numel() else x for x in inputs]
    exact = [True] * len(inputs)
    for st in prog.steps:
        out = apply(st, vals)
        ex = st.op in EXACT_OPS and all(exact[a] for a in st.args)
        if not ex and out.dtype in FLOATS and out.numel():
            out = nudge(out)
        vals.append(out)
        exact.append(ex)
    return tuple(vals[i] for i in prog.outputs)


def _run64(prog, inputs):
    """The program in float64 (the arbiter), and the values whose computation passed
    through a magnitude float32 cannot hold (they and everything read from them)."""
    vals = [_as64(x) for x in inputs]
    tainted = set()
    n_in = len(inputs)
    exact = [True] * n_in
    for k, st in enumerate(prog.steps):
        _F64_OVERFLOW[0] = False
        out = apply(st, vals)
        vals.append(out)
        exact.append(st.op in EXACT_OPS and all(exact[a] for a in st.args))
        big = out.dtype == torch.float64 and out.numel() and bool((out.abs().nan_to_num(0, 0, 0) > F32_MAX).any())
        # sin/cos of a value that carries float32 rounding turn its absolute error into
        # theirs: past |x| = 8 (a convolution's sum, 1e28 from a dot product) the
        # output's error is the summation order's, not the implementation's
        periodic = st.op in ("sin", "cos") and not exact[st.args[0]] and vals[st.args[0]].numel() and \
            bool((vals[st.args[0]].abs().nan_to_num(0, 0, 0) > 8).any())
        if big or periodic or _F64_OVERFLOW[0] or _cancels_past_float32(st, vals, out) or \
                any(a in tainted for a in st.args):
            tainted.add(n_in + k)
    return tuple(vals[i] for i in prog.outputs), tainted


def _cancels_past_float32(st, vals, out):
    """Whether a product's sums (linear, matmul, bmm, addmm) cancel so far that float32's
    rounding of their terms, in any order, moves a sum by more than a thousandth of itself
    plus one: a 1e30 term and its negative beside terms of 1. Which small terms survive is
    then the summation order's choice, and nudging the inputs cannot show it where they are
    bfloat16 or float16 (a float32 ulp's nudge rounds back to them). (linear's activation
    left out: a large negative sum that ReLU makes 0 cancels nothing.)"""
    if st.op not in ("linear", "matmul", "bmm", "addmm") or out.dtype != torch.float64 or not out.numel():
        return False
    bare = Step(st.op, st.args, {**st.params, "act": None}) if st.op == "linear" else st
    mags = [v.abs() if torch.is_tensor(v) and v.is_floating_point() else v for v in vals]
    total, mag = apply(bare, vals), apply(bare, mags).abs()
    k = max(vals[st.args[0]].shape[-2:], default=1)
    return bool((mag * k * 2.0 ** -24 > 1e-3 * (total.abs() + 1)).any())


CURRENT_FILE = os.environ.get("ZENITH_FUZZ_CURRENT")  # set by test_fuzz.py for each worker

PASSES = ["canonicalize", "constant_folding", "cse", "fuse_conv_bn", "fuse_attention_layout", "fuse_conv_residual",
          "fuse_epilogue", "fuse_residual_norm", "fuse_elementwise"]


def _count(cg, prog):
    COUNTS["graphs"] += 1
    r = cg.report
    for name in PASSES:
        if r.passes.get(name, 0) > 0:
            COUNTS[name] += 1
    if r.nodes_native < r.nodes_total:
        COUNTS["with_fallback"] += 1
    if r.segments and any(e.reused_bytes > 0 for e in r.executables):
        COUNTS["planner_reuse"] += 1
    n_in = len(prog.inputs)
    outs = prog.outputs
    if len(set(outs)) < len(outs) or any(o < n_in for o in outs):
        COUNTS["planner_output_is_input_or_repeated"] += 1
    views = {"reshape", "permute", "transpose", "expand", "slice", "select", "unsqueeze", "squeeze", "flatten", "split"}
    if any(o >= n_in and prog.steps[o - n_in].op in views for o in outs):
        COUNTS["planner_output_is_view"] += 1
