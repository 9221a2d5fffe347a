"""ATen -> Zenith IR: the conversion table.

Every ATen overload Zenith runs natively has one entry in ``CONVERTERS``; anything
else falls back to PyTorch with the reason recorded (see partition.py). A converter
receives a ``Lowering`` context and the fx node, emits Zenith nodes and returns the
value id(s) the fx node's result maps to. It raises ``Unsupported`` with a reason
for argument combinations Zenith does not handle.
"""
from __future__ import annotations

import functools
import math
import operator

import torch

from zenith import _C
from zenith.quant import ops as _quant_ops  # noqa: F401  (registers torch.ops.zenith.qlinear/qconv2d/qembedding)

aten = torch.ops.aten

DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "b8",
    torch.uint8: "u8",  # quantized weights (zenith.quant): only the quant ops and data movement take it
}
# Zenith dtype name -> code (the `dtype` attribute of cast/full/arange, run_raw's code),
# as the C++ core declares them (csrc/zenith/dtype.h), never restated here.
DTYPE_CODES = {d.name: d.value for d in _C.DType}


class Unsupported(Exception):
    """A node Zenith cannot run; the message is the reason shown to the user."""


def sym_str(s):
    """An int, or the text of a SymInt's expression (parsed by the C++ core)."""
    if isinstance(s, torch.fx.Node):  # a scalar node of the graph: use its symbolic value
        s = meta(s)
    if isinstance(s, int):
        return s
    if isinstance(s, torch.SymInt):
        expr = s.node.expr
        if expr.is_number:
            return int(expr)
        text = str(expr)
        for sym in expr.free_symbols:
            if not str(sym).startswith("s"):
                raise Unsupported(f"data-dependent size {text}")
        return text
    raise Unsupported(f"non-integer size {s!r}")


def meta(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def check_tensor_meta(v, what):
    if not isinstance(v, torch.Tensor):
        raise Unsupported(f"{what} is not a tensor")
    if v.device.type != "cpu":
        raise Unsupported(f"device {v.device.type}: Zenith has no {v.device.type} backend yet")
    if v.dtype not in DTYPES:
        raise Unsupported(f"dtype {v.dtype}")
    if v.is_sparse or v.layout != torch.strided:
        raise Unsupported("non-strided layout")


def physical_perm(m):
    """For a tensor whose memory is a permutation of a contiguous layout but which is
    not contiguous itself (a transposed weight, say), the perm with m.permute(perm)
    contiguous; None for contiguous, overlapping, gapped or symbolic layouts."""
    if not isinstance(m, torch.Tensor) or m.dim() < 2:
        return None
    if any(isinstance(x, torch.SymInt) for x in (*m.shape, *m.stride())):
        return None
    if m.is_contiguous():
        return None
    sizes, strides = list(m.shape), list(m.stride())
    perm = sorted(range(m.dim()), key=lambda d: (-strides[d], d))
    if perm == list(range(m.dim())):
        return None
    expect = 1
    for d in reversed(perm):
        if sizes[d] != 1 and strides[d] != expect:
            return None
        expect *= sizes[d]
    return perm


class Lowering:
    """Builds one Zenith graph from a run of fx nodes."""

    def __init__(self, gm=None):
        self.gm = gm
        self.g = _C.Graph()
        self.env = {}  # fx node -> value id (or tuple of ids for multi-output ops)
        self.inputs = []  # fx nodes that became graph inputs, in order
        self.input_perms = []  # per input: None, or the permute that makes it contiguous
        self.const_keepalive = []

    # -- values --
    def val(self, n):
        if isinstance(n, torch.fx.Node):
            if n in self.env:
                v = self.env[n]
                if isinstance(v, tuple):
                    raise Unsupported("tuple used as a tensor")
                return v
            if n.op == "get_attr" and self.gm is not None:
                t = getattr(self.gm, n.target)
                if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dtype in DTYPES:
                    from torch._subclasses.fake_tensor import unset_fake_temporarily

                    with unset_fake_temporarily():  # compilation runs under fake mode
                        t = t.detach().contiguous()
                    self.const_keepalive.append(t)  # the graph borrows this memory
                    v = self.g.add_constant(t)
                    self.env[n] = v
                    return v
            m = meta(n)
            check_tensor_meta(m, f"input {n.name}")
            perm = physical_perm(m)
            if perm is None:
                v = self.g.add_input(n.name, DTYPES[m.dtype], [sym_str(d) for d in m.shape])
            else:  # a transposed view (e.g. a weight saved for backward): read it in place
                v = self.g.add_input(n.name, DTYPES[m.dtype], [sym_str(m.shape[d]) for d in perm])
                inv = [0] * len(perm)
                for j, d in enumerate(perm):
                    inv[d] = j
                v = self.emit("permute", [v], perm=inv)
            self.env[n] = v
            self.inputs.append(n)
            self.input_perms.append(perm)
            return v
        raise Unsupported(f"expected a tensor argument, got {type(n).__name__}")

    def emit(self, op, inputs, **attrs):
        outs = self.g.add_node(op, list(inputs), attrs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def scalar(self, value, dtype):
        if isinstance(value, torch.SymInt):
            value = sym_str(value)
            if isinstance(value, str):  # a size used as a number (positions past a cache's length:
                # arange(n) + past): its value per call, from the shapes that bind its symbols
                return self.cast(self.emit("sym_value", [], value=[value], dtype=DTYPE_CODES["i64"]), dtype)
        if isinstance(value, torch.SymFloat):
            raise Unsupported("symbolic float operand")
        if isinstance(value, float) and dtype in ("i64", "i32", "b8") and value != int(value):
            raise Unsupported("float scalar with an integer tensor")
        return self.g.add_scalar(float(value), dtype)

    def dtype(self, v):
        return self.g.value_dtype(v)

    def shape(self, v):
        return self.g.value_shape(v)

    def cast(self, v, dtype):
        if self.dtype(v) == dtype:
            return v
        return self.emit("cast", [v], dtype=DTYPE_CODES[dtype])

    def operand(self, a, dtype):
        """A tensor or Python scalar argument as a value of `dtype`."""
        if isinstance(a, torch.fx.Node):
            if isinstance(meta(a), (int, torch.SymInt)):  # a scalar node (sym_size): its value
                return self.scalar(meta(a), dtype)
            return self.cast(self.val(a), dtype)
        if isinstance(a, (bool, int, float, torch.SymInt)):
            return self.scalar(a, dtype)
        raise Unsupported(f"operand of type {type(a).__name__}")


def out_meta(node):
    m = meta(node)
    if isinstance(m, (list, tuple)):
        for x in m:
            if isinstance(x, torch.Tensor):
                check_tensor_meta(x, f"output of {node.name}")
        return m
    check_tensor_meta(m, f"output of {node.name}")
    return m


def out_dtype(node):
    return DTYPES[out_meta(node).dtype]


def out_shape(node):
    return [sym_str(d) for d in out_meta(node).shape]


def norm_dim(d, rank):
    return d + max(rank, 1) if d < 0 else d


def args_of(node, *names_defaults):
    """Positional-or-keyword arguments of an ATen call as a list, with defaults."""
    out = []
    for i, (name, default) in enumerate(names_defaults):
        if i < len(node.args):
            out.append(node.args[i])
        else:
            out.append(node.kwargs.get(name, default))
    return out


def only_first_output_used(node, what):
    for u in node.users:
        if u.target is operator.getitem and u.args[1] != 0 and u.users:
            raise Unsupported(f"{what}: output {u.args[1]} (training statistics) is not produced")


# ---------------------------------------------------------------- converters
CONVERTERS = {}


def register(*targets):
    def deco(fn):
        for t in targets:
            CONVERTERS[t] = fn
        return fn

    return deco


def _unary(op, float_only):
    def conv(L, node):
        dt = out_dtype(node)
        x = L.cast(L.val(node.args[0]), dt) if float_only else L.val(node.args[0])
        return L.emit(op, [x])

    return conv


for _op, _targets, _float in [
    ("neg", [aten.neg.default], False),
    ("abs", [aten.abs.default], False),
    ("exp", [aten.exp.default], True),
    ("log", [aten.log.default], True),
    ("log1p", [aten.log1p.default], True),
    ("expm1", [aten.expm1.default], True),
    ("sqrt", [aten.sqrt.default], True),
    ("rsqrt", [aten.rsqrt.default], True),
    ("reciprocal", [aten.reciprocal.default], True),
    ("sin", [aten.sin.default], True),
    ("cos", [aten.cos.default], True),
    ("tanh", [aten.tanh.default], True),
    ("erf", [aten.erf.default], True),
    ("sigmoid", [aten.sigmoid.default], True),
    ("relu", [aten.relu.default], False),
    ("silu", [aten.silu.default], True),
    ("hardswish", [aten.hardswish.default], True),
    ("hardsigmoid", [aten.hardsigmoid.default], True),
    ("floor", [aten.floor.default], False),
    ("ceil", [aten.ceil.default], False),
    ("isnan", [aten.isnan.default], False),
]:
    register(*_targets)(_unary(_op, _float))


@register(aten.logical_not.default, aten.bitwise_not.default)
def _logical_not(L, node):
    x = L.val(node.args[0])
    if node.target is aten.bitwise_not.default and L.dtype(x) != "b8":
        raise Unsupported("bitwise_not on integers")
    return L.emit("logical_not", [x])


@register(aten.gelu.default)
def _gelu(L, node):
    (x, approx) = args_of(node, ("self", None), ("approximate", "none"))
    return L.emit("gelu", [L.val(x)], approximate=1 if approx == "tanh" else 0)


@register(aten.clamp.default, aten.hardtanh.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(L, node):
    if node.target is aten.hardtanh.default:
        x, lo, hi = args_of(node, ("self", None), ("min_val", -1.0), ("max_val", 1.0))
    elif node.target is aten.clamp_min.default:  # F.normalize's norm.clamp_min(eps)
        (x, lo), hi = args_of(node, ("self", None), ("min", None)), None
    elif node.target is aten.clamp_max.default:
        (x, hi), lo = args_of(node, ("self", None), ("max", None)), None
    else:
        x, lo, hi = args_of(node, ("self", None), ("min", None), ("max", None))
    attrs = {}
    if lo is not None:
        attrs["min"] = float(lo)
    if hi is not None:
        attrs["max"] = float(hi)
    v = L.cast(L.val(x), out_dtype(node))
    return L.emit("clamp", [v], **attrs)


def _binary(op, cmp=False):
    def conv(L, node):
        a, b = node.args[0], node.args[1]
        if cmp:
            ma = meta(a) if isinstance(a, torch.fx.Node) else a
            mb = meta(b) if isinstance(b, torch.fx.Node) else b
            dt = DTYPES.get(torch.result_type(ma, mb))
            if dt is None:
                raise Unsupported("comparison dtype")
        else:
            dt = out_dtype(node)
        alpha = node.kwargs.get("alpha", 1)
        va = L.operand(a, dt)
        vb = L.operand(b, dt)
        if alpha != 1:
            vb = L.emit("mul", [vb, L.scalar(alpha, dt)])
        return L.emit(op, [va, vb])

    return conv


for _op, _targets in [
    ("add", [aten.add.Tensor, aten.add.Scalar]),
    ("sub", [aten.sub.Tensor, aten.sub.Scalar]),
    ("mul", [aten.mul.Tensor, aten.mul.Scalar]),
    ("maximum", [aten.maximum.default]),
    ("minimum", [aten.minimum.default]),
    ("remainder", [aten.remainder.Tensor, aten.remainder.Scalar]),
    ("pow", [aten.pow.Tensor_Scalar]),
    ("logical_and", [aten.logical_and.default]),
    ("logical_or", [aten.logical_or.default]),
]:
    register(*_targets)(_binary(_op))

for _op, _name in [("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge")]:
    register(getattr(aten, _name).Tensor, getattr(aten, _name).Scalar)(_binary(_op, cmp=True))


@register(aten.bitwise_and.Tensor, aten.bitwise_or.Tensor)
def _bitwise(L, node):
    a, b = L.val(node.args[0]), L.val(node.args[1])
    if L.dtype(a) != "b8" or L.dtype(b) != "b8":
        raise Unsupported("bitwise ops on integers")
    return L.emit("logical_and" if node.target is aten.bitwise_and.Tensor else "logical_or", [a, b])


@register(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(L, node):
    dt = out_dtype(node)
    alpha = node.kwargs.get("alpha", 1)
    x = L.operand(node.args[0], dt)
    if alpha != 1:
        x = L.emit("mul", [x, L.scalar(alpha, dt)])
    return L.emit("sub", [L.operand(node.args[1], dt), x])


@register(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode, aten.floor_divide.default)
def _div(L, node):
    dt = out_dtype(node)
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    if node.target is aten.floor_divide.default:
        mode = "floor"
    rounding = {None: 0, "floor": 1, "trunc": 2}[mode]
    return L.emit("div", [L.operand(node.args[0], dt), L.operand(node.args[1], dt)], rounding=rounding)


@register(aten.fmod.Scalar)
def _fmod(L, node):
    # On integers (Swin's window indices, (i + shift) % size): a - trunc(a / b) * b, exact
    # for a divisor of magnitude 2+ (b = +-1 gives 0, without trunc's INT_MIN / -1). Float
    # fmod is C's fmod, which a - trunc(a / b) * b does not round like: left to PyTorch.
    x, b = node.args[0], node.args[1]
    dt = out_dtype(node)
    if dt not in ("i64", "i32") or isinstance(b, (torch.SymInt, torch.fx.Node)) or b != int(b) or b == 0:
        raise Unsupported("fmod other than of integers by a nonzero integer")
    if abs(int(b)) > (2**31 - 1 if dt == "i32" else 2**53):  # scalars travel as doubles; i32's range
        raise Unsupported("fmod by an integer past the scalar's exact range")
    if abs(int(b)) == 1:
        return _full_like_emit(L, node, 0)
    a, vb = L.operand(x, dt), L.scalar(int(b), dt)
    q = L.emit("div", [a, vb], rounding=2)
    return L.emit("sub", [a, L.emit("mul", [q, vb])])


@register(aten.pow.Tensor_Tensor)
def _pow_tensors(L, node):
    # A tensor exponent is pow's whatever its value (eager special-cases only a Python
    # scalar's: pow(-0, tensor(0.5)) is +0 where sqrt(-0) is -0).
    dt = out_dtype(node)
    return L.emit("pow", [L.operand(node.args[0], dt), L.operand(node.args[1], dt)], tensor_exponent=1)


@register(aten.pow.Scalar)
def _pow_scalar(L, node):  # a scalar base, a tensor exponent
    dt = out_dtype(node)
    return L.emit("pow", [L.operand(node.args[0], dt), L.operand(node.args[1], dt)], tensor_exponent=1)


@register(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def _where(L, node):
    dt = out_dtype(node)
    c = L.val(node.args[0])
    if L.dtype(c) != "b8":
        c = L.cast(c, "b8")
    return L.emit("where", [c, L.operand(node.args[1], dt), L.operand(node.args[2], dt)])


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(L, node):
    dt = out_dtype(node)
    x, mask, value = node.args[:3]
    if isinstance(value, torch.fx.Node) and meta(value).dim() != 0:
        raise Unsupported("masked_fill with a non-scalar value")
    return L.emit("where", [L.val(mask), L.operand(value, dt), L.operand(x, dt)])


# -- reductions --
def _dims_arg(d, rank):
    if d is None:
        return []
    if isinstance(d, int):
        return [d]
    return list(d)


@register(aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.mean.default, aten.amax.default,
          aten.amin.default, aten.prod.dim_int, aten.prod.default, aten.any.dim, aten.any.default, aten.any.dims,
          aten.all.dim, aten.all.default)
def _reduce(L, node):
    target = node.target
    x = L.val(node.args[0])
    rank = len(L.shape(x))
    name = target.overloadpacket.__name__
    dims = _dims_arg(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim"), rank)
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    dt = out_dtype(node)
    if name in ("any", "all"):
        # Each element's truth first (casting 0.5 to an integer would make it false;
        # NaN is true), then a count: any = count(x != 0) > 0, all = count(x == 0) == 0,
        # which also gives torch's answers over no elements (False, True).
        if name == "any":
            t = x if L.dtype(x) == "b8" else L.emit("ne", [x, L.scalar(0, L.dtype(x))])
        else:
            t = L.emit("logical_not", [x])
        count = L.emit("reduce_sum", [t], dims=dims, keepdim=int(bool(keep)))
        return L.emit("gt" if name == "any" else "eq", [count, L.scalar(0, "i64")])
    x = L.cast(x, dt)
    op = {"sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max", "amin": "reduce_min",
          "prod": "reduce_prod"}[name]
    if rank == 0:
        dims = []
    return L.emit(op, [x], dims=dims, keepdim=int(bool(keep)))


# What torch's reference decompositions leave (var_mean / var / std and so GroupNorm,
# through torch._refs): prims with explicit dims, where an empty list reduces nothing.
def _prims_dims(node, rank):
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
    return list(range(rank)) if dims is None else [norm_dim(d, rank) for d in dims]


@register(torch.ops.prims.sum.default)
def _prims_sum(L, node):
    x = L.cast(L.val(node.args[0]), out_dtype(node))
    dims = _prims_dims(node, meta(node.args[0]).dim())
    return L.emit("reduce_sum", [x], dims=dims, keepdim=0) if dims else L.emit("copy", [x])


@register(torch.ops.prims.var.default)
def _prims_var(L, node):
    # sum((x - mean)^2) / (n - correction) over dims, in float32 for 16-bit inputs
    m = meta(node.args[0])
    dims = _prims_dims(node, m.dim())
    correction = node.args[2] if len(node.args) > 2 else node.kwargs.get("correction", 1)
    n = 1
    for d in dims:
        n *= m.shape[d]
    if not dims or not isinstance(n, int) or correction is None:
        raise Unsupported("prims.var over no dims or a symbolic count")
    dt = out_dtype(node)
    x = L.cast(L.val(node.args[0]), "f32" if dt in ("f16", "bf16") else dt)
    d = L.emit("sub", [x, L.emit("reduce_mean", [x], dims=dims, keepdim=1)])
    ss = L.emit("reduce_sum", [L.emit("mul", [d, d])], dims=dims, keepdim=0)
    return L.cast(L.emit("div", [ss, L.scalar(float(max(n - correction, 0)), L.dtype(x))], rounding=0), dt)


@register(torch.ops.prims.broadcast_in_dim.default)
def _prims_broadcast_in_dim(L, node):
    a, shape, bdims = node.args[:3]
    inner = [1] * len(shape)
    for i, d in enumerate(bdims):
        inner[d] = sym_str(meta(a).shape[i])
    v = L.emit("reshape", [L.val(a)], shape=inner)
    return v if inner == out_shape(node) else L.emit("expand", [v], shape=out_shape(node))


@register(torch.ops.prims.div.default)
def _prims_div(L, node):
    # true division on floats; on integers prims.div truncates
    dt = out_dtype(node)
    rounding = 2 if dt in ("i64", "i32") else 0
    if dt not in ("f32", "f16", "bf16", "i64", "i32"):
        raise Unsupported(f"prims.div on {dt}")
    return L.emit("div", [L.operand(node.args[0], dt), L.operand(node.args[1], dt)], rounding=rounding)


@register(aten.max.dim, aten.min.dim)
def _max_dim(L, node):
    x = L.val(node.args[0])
    d = node.args[1]
    keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    if node.target is aten.min.dim:
        neg = L.emit("neg", [x])
        values = L.emit("reduce_min", [x], dims=[d], keepdim=int(bool(keep)))
        idx = L.emit("argmax", [neg], dim=d, keepdim=int(bool(keep)))
    else:
        values = L.emit("reduce_max", [x], dims=[d], keepdim=int(bool(keep)))
        idx = L.emit("argmax", [x], dim=d, keepdim=int(bool(keep)))
    return (values, idx)


@register(aten.argmax.default)
def _argmax(L, node):
    x, dim, keep = args_of(node, ("self", None), ("dim", None), ("keepdim", False))
    attrs = {"keepdim": int(bool(keep))}
    if dim is not None:
        attrs["dim"] = dim
    return L.emit("argmax", [L.val(x)], **attrs)


@register(aten.cumsum.default)
def _cumsum(L, node):
    dt = out_dtype(node)
    return L.emit("cumsum", [L.cast(L.val(node.args[0]), dt)], dim=node.args[1])


# -- normalization --
@register(aten._softmax.default, aten._log_softmax.default, aten.softmax.int, aten.log_softmax.int)
def _softmax(L, node):
    x = L.cast(L.val(node.args[0]), out_dtype(node))
    op = "log_softmax" if "log" in node.target.overloadpacket.__name__ else "softmax"
    return L.emit(op, [x], dim=node.args[1])


def _ones_or(L, n, shape_dims, value, dtype):
    if n is not None:
        return L.val(n)
    return L.emit("full", [], shape=shape_dims, value=float(value), dtype=DTYPE_CODES[dtype])


def _outputs_used(node):
    return {u.args[1] for u in node.users if u.target is operator.getitem and u.users}


@register(aten.native_layer_norm.default)
def _layer_norm(L, node):
    x, shape, w, b, eps = node.args[:5]
    xv = L.val(x)
    dt = L.dtype(xv)
    norm_shape = [sym_str(s) for s in shape]
    wv = _ones_or(L, w, norm_shape, 1.0, dt)
    bv = _ones_or(L, b, norm_shape, 0.0, dt)
    y = L.emit("layer_norm", [xv, wv, bv], normalized_ndim=len(shape), eps=float(eps))
    if not _outputs_used(node) & {1, 2}:
        return (y, None, None)
    # Training: the backward reads each row's mean and 1 / sqrt(biased variance + eps),
    # shaped [*batch, 1, ...] as ATen saves them, computed in float32.
    rank = meta(x).dim()
    dims = list(range(rank - len(shape), rank))
    xf = L.cast(xv, "f32")
    mean = L.emit("reduce_mean", [xf], dims=dims, keepdim=1)
    d = L.emit("sub", [xf, mean])
    var = L.emit("reduce_mean", [L.emit("mul", [d, d])], dims=dims, keepdim=1)
    rstd = L.emit("rsqrt", [L.emit("add", [var, L.scalar(float(eps), "f32")])])
    stat_dt = DTYPES[out_meta(node)[1].dtype]
    return (y, L.cast(mean, stat_dt), L.cast(rstd, stat_dt))


@register(aten._native_batch_norm_legit_no_training.default, aten.native_batch_norm.default)
def _batch_norm(L, node):
    only_first_output_used(node, "batch_norm")
    if node.target is aten.native_batch_norm.default:
        x, w, b, mean, var, training, _momentum, eps = node.args[:8]
        if training:
            raise Unsupported("batch_norm in training mode")
    else:
        x, w, b, mean, var, _momentum, eps = node.args[:7]
    if mean is None or var is None:
        raise Unsupported("batch_norm without running statistics")
    xv = L.val(x)
    c = L.shape(xv)[1]
    wv = _ones_or(L, w, [c], 1.0, L.dtype(xv))
    bv = _ones_or(L, b, [c], 0.0, L.dtype(xv))
    return (L.emit("batch_norm", [xv, wv, bv, L.val(mean), L.val(var)], eps=float(eps)), None, None)


# -- linear algebra --
def _float_only(node, what):
    """Zenith's GEMM, convolution and pooling kernels are floating point: integer ones
    (which torch computes exactly, with integer division in avg_pool) stay in PyTorch."""
    m = meta(node)
    m = m[0] if isinstance(m, (list, tuple)) else m
    if isinstance(m, torch.Tensor) and not m.dtype.is_floating_point:
        raise Unsupported(f"integer {what}")


@register(aten.mm.default, aten.bmm.default)
def _mm(L, node):
    _float_only(node, "matmul")
    return L.emit("matmul", [L.val(node.args[0]), L.val(node.args[1])])


@register(aten.addmm.default)
def _addmm(L, node):
    _float_only(node, "addmm")
    bias, a, b = node.args[:3]
    beta = node.kwargs.get("beta", 1)
    alpha = node.kwargs.get("alpha", 1)
    return L.emit("addmm", [L.val(bias), L.val(a), L.val(b)], alpha=float(alpha), beta=float(beta))


def static_ints(values, what):
    """Plain ints from an op's int-list argument; a symbolic one (a size under dynamic
    shapes: avg_pool2d(x, x.shape[2:]), a pad to a multiple) is Unsupported: the
    attribute is fixed when the graph is built."""
    out = []
    for v in values:
        v = sym_str(v)
        if not isinstance(v, int):
            raise Unsupported(f"symbolic {what} {v}")
        out.append(v)
    return out


def _pair(v, what="size"):
    """(height, width) from an int or a list of one or two ints, as torch expands them."""
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(v) == 1:
        v = v * 2
    if len(v) != 2:
        raise Unsupported(f"expected 1 or 2 values, got {len(v)}")
    return static_ints(v, what)


def _conv_geometry(m_x, stride, padding, dilation, out_pad=(0,)):
    """A convolution's (stride, padding, dilation, output_padding) as conv2d's pairs: a
    conv1d's ([N, C, L]: Whisper's and wav2vec2's front ends) as a conv2d over one row."""
    if m_x.dim() == 3:
        def one(v, what, first):
            v = static_ints(v if isinstance(v, (list, tuple)) else [v], what)
            if len(v) != 1:
                raise Unsupported(f"conv1d with {len(v)} {what} values")
            return [first, *v]
        return (one(stride, "stride", 1), one(padding, "padding", 0), one(dilation, "dilation", 1),
                one(out_pad, "output_padding", 0))
    if m_x.dim() != 4:
        raise Unsupported(f"convolution over {m_x.dim() - 2}-d input (only 1-d and 2-d)")
    return _pair(stride), _pair(padding), _pair(dilation), _pair(out_pad, "output_padding")


def _as_2d(L, t):
    """A conv1d operand ([N, C, L] data or [O, I, K] filters) as its one-row conv2d form;
    a 4-d one as it is."""
    if meta(t).dim() == 4:
        return L.val(t)
    s = [sym_str(d) for d in meta(t).shape]
    return L.emit("reshape", [L.val(t)], shape=[s[0], s[1], 1, s[2]])


def _filter_shape(w):
    """The filters' shape [A, B, KH, KW] as conv2d reads them (a conv1d's [A, B, K] as [A, B, 1, K])."""
    s = static_ints(meta(w).shape, "filter shape")
    return s if len(s) == 4 else [s[0], s[1], 1, s[2]]


# A stride-1 transposed convolution (an input's gradient) runs as conv2d with flipped
# filters where conv2d runs it by Winograd with the filters transformed for the call
# (_C.conv2d_winograd_per_call: enough tiles in the call), and for 1x1 filters (their
# flip is a transpose); else, on output maps of at least _FLIP_MIN_PIXELS pixels where
# Winograd does not apply. Smaller calls take conv_transpose2d (a GEMM, then col2im).
# In-process on Zen 4, 2 threads, a 3x3 conv's input gradient, flip + conv2d /
# conv_transpose2d: batch 8, 28 x 28 (64 channels) 0.76x the time, 14 x 14 (128) 0.85x
# (2026-12-07, sixtieth session); batch 8 on 7 x 7, with the blocked Winograd and its
# vector filter transform (sixty-first session), 256 channels 0.72-0.83x, 512
# 0.68-0.78x; where the call's tiles are too few for Winograd, by the GEMM: 7 x 7 at
# batches 1-2 1.3-1.8x, batch 4 0.88-1.23x, 14 x 14 at batch 1 1.2x (flip_micro.txt);
# 4 x 4 (512) 0.95-1.08x; 1x1 convs 0.52x at 28 x 28; depthwise 3x3 convs (MobileNet V2's,
# batch 8; conv2d's depthwise kernels run vectors across channels on small maps) 0.17x on
# 4 x 4 to 0.43x on 56 x 56 (dw_micro.txt).
_FLIP_MIN_PIXELS = 100


def _flip_pays(wshape, padding, dilation, groups, out_hw, batch):
    """Whether a stride-1 transposed convolution with filters [A, B, KH, KW] (groups) onto
    maps out_hw (None: symbolic) of `batch` images (None: symbolic) runs as a conv2d."""
    if wshape[2:] == [1, 1] or out_hw is None or (groups > 1 and wshape[0] == groups and wshape[1] == 1):
        return True  # (a depthwise conv: conv2d's depthwise kernels, vectors across channels on small maps)
    pad = [dilation[i] * (wshape[2 + i] - 1) - padding[i] for i in range(2)]
    if _C.conv2d_uses_winograd(groups, wshape[2], wshape[3], [1, 1], pad, list(dilation), wshape[0], out_hw[0],
                               out_hw[1], wshape[1] * groups):
        return batch is None or _C.conv2d_winograd_per_call(batch, out_hw[0], out_hw[1])
    return out_hw[0] * out_hw[1] >= _FLIP_MIN_PIXELS


def _conv_transpose_emit(L, x, w, b, wshape, stride, padding, out_pad, dilation, groups, out_hw, batch):
    """ConvTranspose2d(x) with filters w [A, B, KH, KW], which is also the gradient of a
    conv2d's input (x its output's gradient, w its filters); out_hw its output's static
    (height, width), or None; batch x's images (None: symbolic). At stride 1 where it
    pays (_flip_pays), it is the convolution of x with the filters turned half a turn
    (flip_filters), padded by the windows' reach less the padding: conv2d's kernels
    (Winograd, packed GEMMs) run it. Otherwise conv_transpose2d (a GEMM, then the
    columns added into place)."""
    reach = [dilation[0] * (wshape[2] - 1), dilation[1] * (wshape[3] - 1)]
    if (list(stride) == [1, 1] and list(out_pad) == [0, 0] and all(p <= r for p, r in zip(padding, reach))
            and _flip_pays(wshape, padding, dilation, groups, out_hw, batch)):
        wf = L.emit("flip_filters", [w], groups=groups)
        return L.emit("conv2d", [x, wf, b if b is not None else wf], stride=[1, 1],
                      padding=[r - p for r, p in zip(reach, padding)], dilation=list(dilation), groups=groups,
                      has_bias=int(b is not None))
    return L.emit("conv_transpose2d", [x, w, b if b is not None else w], stride=list(stride), padding=list(padding),
                  output_padding=list(out_pad), dilation=list(dilation), groups=groups, has_bias=int(b is not None))


def _static_batch(t):
    """t's first dim (its images) as an int, or None if symbolic."""
    n = meta(t).shape[0]
    return n if isinstance(n, int) else None


def _static_hw(t):
    """The last two dims of t (a conv1d's one row and its length) as ints, or None if symbolic."""
    hw = [sym_str(d) for d in meta(t).shape[2:]]
    hw = [1] + hw if len(hw) == 1 else hw
    return hw if all(isinstance(v, int) for v in hw) else None


@register(aten.convolution.default)
def _conv(L, node):
    x, w, b, stride, padding, dilation, transposed, out_pad, groups = node.args[:9]
    _float_only(node, "convolution")
    stride, padding, dilation, out_pad = _conv_geometry(meta(x), stride, padding, dilation, out_pad)
    xv, wv = _as_2d(L, x), _as_2d(L, w)
    bv = L.val(b) if b is not None else None
    if transposed:
        y = _conv_transpose_emit(L, xv, wv, bv, _filter_shape(w), stride, padding, out_pad, dilation, groups,
                                 _static_hw(node), _static_batch(x))
    else:
        y = L.emit("conv2d", [xv, wv, bv if bv is not None else wv], stride=stride, padding=padding,
                   dilation=dilation, groups=groups, has_bias=int(b is not None))
    return y if meta(x).dim() == 4 else L.emit("reshape", [y], shape=out_shape(node))


@register(aten.convolution_backward.default)
def _conv_backward(L, node):
    # The gradients a convolution's backward asks for (output_mask): of its input, of
    # its filters, of its bias. For a conv2d: the input's is the transposed convolution
    # of the output's gradient with the filters, the filters' is conv2d_weight_grad, the
    # bias's a sum. For a transposed convolution the roles swap: the input's is the
    # conv2d of the output's gradient, the filters' conv2d_weight_grad with the
    # gradient as its input.
    gy, x, w, _bias_sizes, stride, padding, dilation, transposed, out_pad, groups, mask = node.args[:11]
    if not meta(gy).dtype.is_floating_point:
        raise Unsupported("integer convolution_backward")
    stride, padding, dilation, out_pad = _conv_geometry(meta(x), stride, padding, dilation, out_pad)
    if transposed and any(o >= s for o, s in zip(out_pad, stride)):
        # (dilation > stride allows it) the input's gradient, a conv2d of the output's,
        # would have rows past the input's
        raise Unsupported("transposed convolution_backward with output_padding >= stride")
    one_d = meta(x).dim() == 3
    gv = _as_2d(L, gy)  # only the operands the asked-for gradients read become inputs
    wshape = _filter_shape(w)
    back = (lambda v, t: L.emit("reshape", [v], shape=[sym_str(d) for d in meta(t).shape])) if one_d else \
        (lambda v, t: v)
    grads = [None, None, None]
    if mask[0]:
        wv = _as_2d(L, w)
        if transposed:
            gi = L.emit("conv2d", [gv, wv, wv], stride=stride, padding=padding, dilation=dilation, groups=groups)
        else:
            # output_padding: the input rows and columns past the last window (a stride
            # that does not divide the input) get no gradient but must be there
            xs = static_ints(meta(x).shape[2:], "input size")
            ys = static_ints(meta(gy).shape[2:], "output size")
            xs, ys = ([1] + xs, [1] + ys) if one_d else (xs, ys)
            op = [xs[i] - ((ys[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (wshape[2 + i] - 1) + 1)
                  for i in range(2)]
            gi = _conv_transpose_emit(L, gv, wv, None, wshape, stride, padding, op, dilation, groups, xs,
                                      _static_batch(gy))
        grads[0] = back(gi, x)
    if mask[1]:
        xv = _as_2d(L, x)
        a, b_ = (xv, gv) if transposed else (gv, xv)
        grads[1] = back(L.emit("conv2d_weight_grad", [a, b_], stride=stride, padding=padding, dilation=dilation,
                               groups=groups, kernel=wshape[2:]), w)
    if mask[2]:
        grads[2] = L.emit("reduce_sum", [L.val(gy)], dims=[0, 2] if one_d else [0, 2, 3], keepdim=0)
    return tuple(grads)


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _sdpa_cpu(L, node):
    only_first_output_used(node, "sdpa")
    q, k, v = node.args[:3]
    dropout = node.args[3] if len(node.args) > 3 else node.kwargs.get("dropout_p", 0.0)
    causal = node.args[4] if len(node.args) > 4 else node.kwargs.get("is_causal", False)
    mask = node.kwargs.get("attn_mask")
    scale = node.kwargs.get("scale")
    if dropout:
        raise Unsupported("attention dropout")
    return (_sdpa_emit(L, q, k, v, mask, causal, scale), None)


@register(aten.scaled_dot_product_attention.default)
def _sdpa(L, node):
    q, k, v, mask, dropout, causal, scale, gqa = args_of(
        node, ("query", None), ("key", None), ("value", None), ("attn_mask", None), ("dropout_p", 0.0),
        ("is_causal", False), ("scale", None), ("enable_gqa", False))
    if dropout:
        raise Unsupported("attention dropout")
    return _sdpa_emit(L, q, k, v, mask, causal, scale)


def _sdpa_emit(L, q, k, v, mask, causal, scale):
    for t in (q, k, v):
        if meta(t).dim() != 4:
            raise Unsupported("attention over non-4-d operands")
    qv = L.val(q)
    ins = [qv, L.val(k), L.val(v)]
    attrs = {"is_causal": int(bool(causal)), "has_mask": int(mask is not None)}
    if scale is not None:
        attrs["scale"] = float(scale)
    if mask is not None:
        mv = L.val(mask)
        if L.dtype(mv) not in ("b8", L.dtype(qv)):
            mv = L.cast(mv, L.dtype(qv))
        ins.append(mv)
    else:
        ins.append(qv)
    return L.emit("sdpa", ins, **attrs)


# -- pooling --
def _max_pool_attrs(kernel, stride, padding, dilation, ceil_mode):
    kernel = _pair(kernel, "kernel")
    return dict(kernel=kernel, stride=_pair(stride, "stride") if stride else kernel, padding=_pair(padding, "padding"),
                dilation=_pair(dilation, "dilation"), ceil_mode=int(bool(ceil_mode)))


@register(aten.max_pool2d_with_indices.default)
def _max_pool(L, node):
    # the indices (a training forward saves them for the backward) only where read
    _float_only(node, "max_pool2d")
    x, kernel, stride, padding, dilation, ceil_mode = args_of(
        node, ("self", None), ("kernel_size", None), ("stride", []), ("padding", 0), ("dilation", 1),
        ("ceil_mode", False))
    attrs = _max_pool_attrs(kernel, stride, padding, dilation, ceil_mode)
    if any(u.target is operator.getitem and u.args[1] == 1 and u.users for u in node.users):
        return L.emit("max_pool2d_with_indices", [L.val(x)], **attrs)
    return (L.emit("max_pool2d", [L.val(x)], **attrs), None)


@register(aten.max_pool2d_with_indices_backward.default)
def _max_pool_backward(L, node):
    # each output's gradient added at the input its window took
    gy, x, _kernel, _stride, _padding, _dilation, _ceil_mode, indices = node.args[:8]
    if not meta(x).dtype.is_floating_point:
        raise Unsupported("integer max_pool2d backward")
    return L.emit("max_pool2d_backward", [L.val(gy), L.val(x), L.val(indices)])


@register(aten.avg_pool2d.default)
def _avg_pool(L, node):
    _float_only(node, "avg_pool2d")
    x, kernel, stride, padding, ceil_mode, include_pad, divisor = args_of(
        node, ("self", None), ("kernel_size", None), ("stride", []), ("padding", 0), ("ceil_mode", False),
        ("count_include_pad", True), ("divisor_override", None))
    if divisor is not None:
        raise Unsupported("avg_pool2d divisor_override")
    kernel = _pair(kernel, "kernel")
    stride = _pair(stride, "stride") if stride else kernel
    return L.emit("avg_pool2d", [L.val(x)], kernel=kernel, stride=stride, padding=_pair(padding, "padding"),
                  ceil_mode=int(bool(ceil_mode)), count_include_pad=int(bool(include_pad)))


@register(aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)
def _adaptive_pool(L, node):
    _float_only(node, "adaptive_avg_pool2d")
    return L.emit("adaptive_avg_pool2d", [L.val(node.args[0])], output_size=[sym_str(s) for s in node.args[1]])


@register(aten.upsample_nearest2d.default, aten.upsample_nearest2d.vec, aten._upsample_nearest_exact2d.default,
          aten._upsample_nearest_exact2d.vec, aten.upsample_bilinear2d.default, aten.upsample_bilinear2d.vec)
def _upsample(L, node):
    # F.interpolate(mode="nearest" | "nearest-exact" | "bilinear") on NCHW: the output size
    # from the node, the scale factors (which torch's index arithmetic reads) where given
    _float_only(node, "upsample")
    name = node.target.overloadpacket.__name__
    mode = "bilinear" if "bilinear" in name else "nearest_exact" if "exact" in name else "nearest"
    args = list(node.args)
    align = bool(args.pop(2)) if mode == "bilinear" else False
    if node.target.__name__.endswith("vec"):
        factors = args[2] if len(args) > 2 else node.kwargs.get("scale_factors")
        scales = list(factors) if factors else [None, None]
    else:
        scales = (args[2:4] + [None, None])[:2]
    attrs = {"mode": {"nearest": 0, "bilinear": 1, "nearest_exact": 2}[mode], "align_corners": int(align),
             "size": out_shape(node)[-2:]}
    for k, v in zip(("scale_h", "scale_w"), scales):
        if v is not None:
            if isinstance(v, (torch.SymFloat, torch.fx.Node)):
                raise Unsupported("symbolic upsample scale")
            attrs[k] = float(v)
    return L.emit("upsample2d", [L.val(node.args[0])], **attrs)


# -- data movement --
@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
          aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.flatten.using_ints)
def _reshape(L, node):
    return L.emit("reshape", [L.val(node.args[0])], shape=out_shape(node))


@register(aten.clone.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _copy(L, node):
    return L.emit("copy", [L.val(node.args[0])])


@register(aten.alias.default, aten.detach.default)
def _alias(L, node):
    return L.val(node.args[0])


@register(aten.permute.default)
def _permute(L, node):
    return L.emit("permute", [L.val(node.args[0])], perm=list(node.args[1]))


@register(aten.t.default, aten.transpose.int)
def _transpose(L, node):
    x = L.val(node.args[0])
    r = len(L.shape(x))
    if r < 2:
        return x
    d0, d1 = (0, 1) if node.target is aten.t.default else (norm_dim(node.args[1], r), norm_dim(node.args[2], r))
    perm = list(range(r))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return L.emit("permute", [x], perm=perm)


@register(aten.expand.default)
def _expand(L, node):
    return L.emit("expand", [L.val(node.args[0])], shape=out_shape(node))


def _slice_emit(L, x, dim, start, end, step, out_size):
    return L.emit("slice", [x], dim=dim, start=start, end=end, step=step, out_size=out_size)


@register(aten.slice.Tensor)
def _slice(L, node):
    x, dim, start, end, step = args_of(node, ("self", None), ("dim", 0), ("start", None), ("end", None), ("step", 1))
    xv = L.val(x)
    rank = len(L.shape(xv))
    dim = norm_dim(dim, rank)
    big = 2**62
    start = 0 if start is None else sym_str(start)
    end = big if end is None else sym_str(end)
    if isinstance(end, int) and end > big:
        end = big
    return _slice_emit(L, xv, dim, [start], [end], step, [out_shape(node)[dim]])


@register(aten.slice_scatter.default, aten.select_scatter.default)
def _slice_scatter(L, node):
    # base with base[start:end] along dim replaced by src (a functionalized `x[a:b] = y`;
    # select_scatter's `x[i] = y` is the slice i:i+1 with src given that dim): the slices
    # of base either side, concatenated around src
    if node.target is aten.select_scatter.default:
        base, src, dim, index = node.args[:4]
        dim, step = norm_dim(dim, meta(base).dim()), 1
        index = sym_str(index)
        if not isinstance(index, int):
            raise Unsupported("select_scatter at a symbolic index")
        size = sym_str(meta(base).shape[dim])
        start = index + size if isinstance(size, int) and index < 0 else index
        end = start + 1
        shape = [sym_str(d) for d in meta(src).shape]
        src_v = L.emit("reshape", [L.val(src)], shape=shape[:dim] + [1] + shape[dim:])
    else:
        base, src, dim, start, end, step = args_of(node, ("self", None), ("src", None), ("dim", 0), ("start", None),
                                                   ("end", None), ("step", 1))
        dim = norm_dim(dim, meta(base).dim())
        size = sym_str(meta(base).shape[dim])
        start = 0 if start is None else sym_str(start)
        end = size if end is None else sym_str(end)
        src_v = None
    if step != 1 or not all(isinstance(v, int) for v in (size, start, end)):
        raise Unsupported("slice_scatter with a step or a symbolic bound")
    start, end = (min(max(v + size if v < 0 else v, 0), size) for v in (start, end))
    end = max(end, start)
    dt = out_dtype(node)
    b = L.cast(L.val(base), dt)
    parts = [_slice_emit(L, b, dim, [0], [start], 1, [start])] if start > 0 else []
    if end > start:
        parts.append(L.cast(src_v if src_v is not None else L.val(src), dt))
    if end < size:
        parts.append(_slice_emit(L, b, dim, [end], [size], 1, [size - end]))
    if len(parts) == 1:
        return L.emit("copy", parts)
    return L.emit("cat", parts, dim=dim, out_size=[size])


@register(aten.as_strided.default)
def _as_strided(L, node):
    # Only the case that is a reshape: a contiguous x read with the contiguous strides of
    # the new size (dims of size 1 may carry any stride), from x's first element.
    x, size, stride, offset = args_of(node, ("self", None), ("size", None), ("stride", None),
                                      ("storage_offset", None))
    m = meta(x)
    size, stride = static_ints(size, "size"), static_ints(stride, "stride")
    want, acc = [0] * len(size), 1
    for d in reversed(range(len(size))):
        want[d], acc = acc, acc * size[d]
    if (offset not in (None, 0) or m.storage_offset() != 0 or not m.is_contiguous() or acc != m.numel()
            or any(n != 1 and st != w for n, st, w in zip(size, stride, want))):
        raise Unsupported("as_strided other than a reshape of a contiguous tensor")
    return L.emit("reshape", [L.val(x)], shape=size)


@register(aten.flip.default)
def _flip(L, node):
    # one index_select a dim, by the indices n-1 .. 0
    v = L.val(node.args[0])
    m = meta(node.args[0])
    if m.dim() == 0:  # flip([0]) of a scalar is the scalar
        return L.emit("copy", [v])
    for d in sorted({norm_dim(d, m.dim()) for d in node.args[1]}):
        n = sym_str(m.shape[d])
        if not isinstance(n, int):
            raise Unsupported("flip of a symbolic dim")
        if n > 1:
            idx = L.emit("arange", [], start=float(n - 1), step=-1.0, size=[n], dtype=DTYPE_CODES["i64"])
            v = L.emit("index_select", [v, idx], dim=d, negative=0)
    return v if v != L.val(node.args[0]) else L.emit("copy", [v])


@register(aten.repeat.default)
def _repeat(L, node):
    # x tiled reps[d] times along each dim: x as [1, s0, 1, s1, ...], expanded to
    # [r0, s0, r1, s1, ...], then merged pairwise
    x, reps = node.args[0], static_ints(node.args[1], "repeats")
    xs = [sym_str(d) for d in meta(x).shape]
    if len(reps) < len(xs):
        raise Unsupported("repeat with fewer repeats than dims")
    xs = [1] * (len(reps) - len(xs)) + xs
    inner = [v for d in xs for v in (1, d)]
    tiled = [v for r, d in zip(reps, xs) for v in (r, d)]
    v = L.emit("reshape", [L.val(x)], shape=inner)
    return L.emit("reshape", [L.emit("expand", [v], shape=tiled)], shape=out_shape(node))


@register(aten.select.int)
def _select(L, node):
    x, dim, index = node.args[:3]
    xv = L.val(x)
    rank = len(L.shape(xv))
    dim = norm_dim(dim, rank)
    index = sym_str(index)
    if not isinstance(index, int):
        raise Unsupported("select with a symbolic index")
    end = index + 1 if index != -1 else 2**62
    s = _slice_emit(L, xv, dim, [index], [end], 1, [1])
    return L.emit("reshape", [s], shape=out_shape(node))


@register(aten.split.Tensor, aten.split_with_sizes.default)
def _split(L, node):
    x = L.val(node.args[0])
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    rank = len(L.shape(x))
    dim = norm_dim(dim, rank)
    outs = []
    start = 0
    for m in out_meta(node):
        size = sym_str(m.shape[dim])
        if not isinstance(size, int) or not isinstance(start, int):
            raise Unsupported("split with symbolic sizes")
        outs.append(_slice_emit(L, x, dim, [start], [start + size], 1, [size]))
        start += size
    return tuple(outs)


@register(aten.cat.default)
def _cat(L, node):
    tensors = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    rank = meta(node).dim()
    # torch.cat skips legacy empty 1-d tensors of a different rank
    ins = [t for t in tensors if not (meta(t).dim() == 1 and meta(t).shape[0] == 0 and rank != 1)]
    dt = out_dtype(node)
    vals = [L.cast(L.val(t), dt) for t in ins]
    dim = norm_dim(dim, rank)
    return L.emit("cat", vals, dim=dim, out_size=[out_shape(node)[dim]])


@register(aten.stack.default)
def _stack(L, node):
    tensors = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    rank = meta(node).dim()
    dim = norm_dim(dim, rank)
    shape = out_shape(node)
    piece = shape[:dim] + [1] + shape[dim + 1:]
    vals = [L.emit("reshape", [L.val(t)], shape=piece) for t in tensors]
    return L.emit("cat", vals, dim=dim, out_size=[shape[dim]])


@register(aten.constant_pad_nd.default)
def _pad(L, node):
    x, pad, value = args_of(node, ("self", None), ("pad", None), ("value", 0))
    return L.emit("pad", [L.val(x)], pad=static_ints(pad, "pad amount"), value=float(value))


@register(aten.embedding.default)
def _embedding(L, node):
    return L.emit("embedding", [L.val(node.args[0]), L.val(node.args[1])])


@register(aten.index_select.default)
def _index_select(L, node):
    # aten.index_select and aten.gather refuse negative indices (x[idx] takes them: _index)
    return L.emit("index_select", [L.val(node.args[0]), L.val(node.args[2])], dim=node.args[1], negative=0)


@register(aten.gather.default)
def _gather(L, node):
    return L.emit("gather", [L.val(node.args[0]), L.val(node.args[2])], dim=node.args[1], negative=0)


@register(aten.index.Tensor)
def _index(L, node):
    x, indices = node.args[:2]
    present = [i for i, t in enumerate(indices) if t is not None]
    for i in present:
        if meta(indices[i]).dtype == torch.bool:
            raise Unsupported("boolean-mask indexing (data-dependent shape)")
    if len(present) == 1:
        return L.emit("index_select", [L.val(x), L.val(indices[present[0]])], dim=present[0])
    return L.emit("index", [L.val(x)] + [L.val(indices[i]) for i in present], dims=present)


@register(aten.index_put.default, aten._unsafe_index_put.default)
def _index_put(L, node):
    # x[idx] = values / x[idx] += values with one index tensor on dim 0: rows written in
    # index order (an embedding's gradient is index_put(zeros, [ids], grad, accumulate=True))
    x, indices, values, accumulate = args_of(node, ("self", None), ("indices", None), ("values", None),
                                             ("accumulate", False))
    if len(indices) != 1 or indices[0] is None:
        raise Unsupported("index_put other than with one index tensor on dim 0")
    idx = indices[0]
    if meta(idx).dtype not in (torch.int64, torch.int32):
        raise Unsupported("index_put with a boolean or non-integer index")
    mx = meta(x)
    if mx.dim() == 0:
        raise Unsupported("index_put into a 0-d tensor")
    dt = out_dtype(node)
    if accumulate and dt not in ("f32", "i64", "i32"):
        raise Unsupported(f"index_put accumulating {dt} (Zenith accumulates f32, i64 and i32)")
    shape = [sym_str(d) for d in meta(idx).shape] + [sym_str(d) for d in mx.shape[1:]]
    v = L.operand(values, dt)
    mv = meta(values) if isinstance(values, torch.fx.Node) else None
    if mv is None or [sym_str(d) for d in mv.shape] != shape:
        if mv is not None and mv.dim() > len(shape):
            raise Unsupported("index_put values of higher rank than the indexed rows")
        v = L.emit("expand", [v], shape=shape)
    rows = sym_str(mx.shape[0])
    if _zeros_only_here(x, node) and isinstance(rows, int):  # an embedding's gradient: written once
        return L.emit("index_put", [L.val(idx), v], accumulate=int(bool(accumulate)), zeros_rows=rows)
    return L.emit("index_put", [L.val(x), L.val(idx), v], accumulate=int(bool(accumulate)))


def _zeros_only_here(x, user):
    """x is a tensor of zeros made for `user` alone (embedding_dense_backward's new_zeros)."""
    if not isinstance(x, torch.fx.Node) or x.op != "call_function" or list(x.users) != [user]:
        return False
    if x.target in (aten.zeros.default, aten.new_zeros.default, aten.zeros_like.default):
        return True
    if x.target in (aten.full.default, aten.new_full.default, aten.full_like.default):
        value = x.args[1] if x.target is not aten.new_full.default else x.args[2]
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0
    return False


@register(aten.tril.default, aten.triu.default)
def _tril(L, node):
    diag = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
    return L.emit("tril", [L.val(node.args[0])], diagonal=diag, upper=int(node.target is aten.triu.default))


# -- quantized weights (zenith.quant's custom ops) --
@functools.cache
def qformat_code(name):
    """The code of format `name` in the core's QFormat enum (the `format` attribute of
    qmatmul / qembedding), read from the core: its exported enum if it has one, else the
    position in _C.quant_formats(), taken to list the formats in enum order
    (tests/python/quant/test_quant_ops.py checks that the core prints each code by its name)."""
    enum = getattr(_C, "QFormat", None)
    if enum is not None:
        return enum.__members__[name].value
    return list(_C.quant_formats()).index(name)


def _float32_operand(x, what):
    if meta(x).dtype != torch.float32:
        raise Unsupported(f"{what} takes float32 values, got {meta(x).dtype}")


@register(torch.ops.zenith.qlinear.default)
def _qlinear(L, node):
    x, w, bias, fmt, x_scale, row_scale, x_mul = args_of(node, ("x", None), ("w", None), ("bias", None),
                                                         ("format", None), ("x_scale", None), ("row_scale", False),
                                                         ("x_mul", None))
    _float32_operand(x, "qmatmul")
    ins = [L.val(x), L.val(w)]
    if bias is not None:
        _float32_operand(bias, "qmatmul's bias")
        ins.append(L.val(bias))
    attrs = {} if x_scale is None else {"x_scale": float(x_scale)}
    if row_scale:
        attrs["row_scale"] = True
    if x_mul is not None:  # last (qmatmul's x_mul)
        _float32_operand(x_mul, "qmatmul's x_mul")
        ins.append(L.val(x_mul))
        attrs["x_mul"] = True
    return L.emit("qmatmul", ins, format=qformat_code(fmt), **attrs)


@register(torch.ops.zenith.qconv2d.default)
def _qconv2d(L, node):
    x, w, bias, kernel, stride, padding, dilation, x_scale = args_of(
        node, ("x", None), ("w", None), ("bias", None), ("kernel", None), ("stride", None), ("padding", None),
        ("dilation", None), ("x_scale", None))
    _float32_operand(x, "an int8 conv2d")
    ins = [L.val(x), L.val(w)]
    if bias is not None:
        _float32_operand(bias, "an int8 conv2d's bias")
    ins.append(L.val(bias) if bias is not None else ins[1])
    attrs = {} if x_scale is None else {"x_scale": float(x_scale)}
    return L.emit("conv2d", ins, stride=_pair(stride), padding=_pair(padding), dilation=_pair(dilation), groups=1,
                  has_bias=int(bias is not None), kernel=_pair(kernel), **attrs)


@register(torch.ops.zenith.qembedding.default)
def _qembedding(L, node):
    w, ids, fmt = args_of(node, ("w", None), ("ids", None), ("format", None))
    return L.emit("qembedding", [L.val(w), L.val(ids)], format=qformat_code(fmt))


# prims.convert_element_type is what decompositions leave for dtype conversions; run
# through PyTorch it costs ~0.3 ms a call (its Python prim implementation), and it
# splits the segment around it.
@register(aten._to_copy.default, aten.to.dtype, torch.ops.prims.convert_element_type.default)
def _to_copy(L, node):
    m = out_meta(node)
    x = L.val(node.args[0])
    if DTYPES[m.dtype] == L.dtype(x):
        return L.emit("copy", [x])
    return L.emit("cast", [x], dtype=DTYPE_CODES[DTYPES[m.dtype]])


# -- sources --
def _full_like_emit(L, node, value):
    if isinstance(value, (torch.SymInt, torch.SymFloat)) or isinstance(value, torch.fx.Node):
        raise Unsupported("symbolic fill value")
    return L.emit("full", [], shape=out_shape(node), value=float(value), dtype=DTYPE_CODES[out_dtype(node)])


@register(aten.full.default, aten.new_full.default)
def _full(L, node):
    value = node.args[1] if node.target is aten.full.default else node.args[2]
    return _full_like_emit(L, node, value)


@register(aten.zeros.default, aten.new_zeros.default, aten.zeros_like.default, aten.empty.memory_format,
          aten.new_empty.default, aten.empty_like.default, aten.zero.default)
def _zeros(L, node):
    return _full_like_emit(L, node, 0.0)


@register(aten.ones.default, aten.new_ones.default, aten.ones_like.default)
def _ones(L, node):
    return _full_like_emit(L, node, 1.0)


@register(aten.full_like.default, aten.fill.Scalar)
def _full_like(L, node):
    return _full_like_emit(L, node, node.args[1])


@register(aten.copy.default)
def _copy_into(L, node):
    # aten.copy(x, src): src broadcast to x's shape in x's dtype (a functionalized
    # `x[a:b] = y`, before the slice_scatter that puts it back)
    v = L.cast(L.val(node.args[1]), out_dtype(node))
    if [sym_str(d) for d in meta(node.args[1]).shape] == out_shape(node):
        return L.emit("copy", [v])
    return L.emit("expand", [v], shape=out_shape(node))


@register(aten.fill.Tensor)
def _fill_tensor(L, node):
    # x.fill_(t) with a one-element t (Swin's mask regions, `mask[a:b] = count`): t
    # broadcast to x's shape in x's dtype
    x, value = node.args[0], node.args[1]
    if meta(value).numel() != 1:
        raise Unsupported("fill with a tensor of more than one element")
    v = L.cast(L.val(value), out_dtype(node))
    if meta(value).dim() > 0:
        v = L.emit("reshape", [v], shape=[])
    return L.emit("expand", [v], shape=out_shape(node))


@register(aten.scalar_tensor.default)
def _scalar_tensor(L, node):
    return _full_like_emit(L, node, node.args[0])


@register(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(L, node):
    a = list(node.args)
    if node.target is aten.arange.default:
        start, end, step = 0, a[0], 1
    elif node.target is aten.arange.start:
        start, end, step = a[0], a[1], 1
    else:
        start, end, step = a[0], a[1], a[2] if len(a) > 2 else 1
    for s in (start, step):
        if not isinstance(s, (int, float)):
            raise Unsupported("symbolic arange start/step")
    size = out_shape(node)[0]
    return L.emit("arange", [], start=float(start), step=float(step), size=[size], dtype=DTYPE_CODES[out_dtype(node)])


def _getitem(L, node):
    src, i = node.args
    tup = L.env.get(src)
    if not isinstance(tup, tuple):
        raise Unsupported("getitem on a value that is not a tuple from Zenith")
    v = tup[i]
    if v is None:
        raise Unsupported(f"output {i} of {src.name} is not produced")
    return v


CONVERTERS[operator.getitem] = _getitem

# Ops Zenith does not run itself and lets AOTAutograd decompose into ones it does.
DECOMPOSE = [
    aten.native_group_norm.default, aten.var_mean.correction, aten.var.correction, aten.std.correction,
    aten.addcmul.default, aten.addcdiv.default, aten.leaky_relu.default, aten.elu.default, aten.softplus.default,
    aten.baddbmm.default, aten.logsumexp.default, aten.silu_backward.default, aten.mish.default,
    aten.hardswish_backward.default, aten.hardsigmoid_backward.default, aten.glu.default, aten.linalg_vector_norm.default,
    aten.squeeze.dims, aten.unbind.int, aten.native_dropout.default, aten._unsafe_index.Tensor,
    aten.log_sigmoid_forward.default, aten.threshold_backward.default, aten.mv.default, aten.dot.default,
    aten.nan_to_num.default, aten.sign.default, aten.roll.default, aten.rot90.default, aten.masked_fill_.Scalar,
    aten._weight_norm_interface.default,
    # training: backward ops and training-mode forwards whose decompositions are Zenith ops
    aten.tanh_backward.default, aten.gelu_backward.default, aten.hardtanh_backward.default,
    aten.sigmoid_backward.default, aten.leaky_relu_backward.default, aten.elu_backward.default,
    aten._softmax_backward_data.default, aten._log_softmax_backward_data.default,
    aten.native_dropout_backward.default, aten.select_backward.default, aten.slice_backward.default,
    aten._safe_softmax.default, aten.native_layer_norm_backward.default, aten.native_batch_norm_backward.default,
    aten._native_batch_norm_legit_functional.default, aten.mse_loss_backward.default,
    aten.embedding_dense_backward.default, aten._unsafe_masked_index_put_accumulate.default,
]


def decomposition_table():
    from torch._decomp import get_decompositions

    return get_decompositions([op for op in DECOMPOSE if op not in CONVERTERS])
