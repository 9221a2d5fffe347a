"""Every op in Zenith's table against eager PyTorch: several shapes each, with
broadcasting, non-contiguous and transposed inputs, size-0 and size-1 dims,
negative dims, and every dtype the op supports."""
import math

import pytest
import torch
import torch.nn.functional as F

from harness import check, compile_fn

import zenith
from zenith import _C

f32, f16, bf16, i64, i32, b8 = torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool
FLOATS = [f32, f16, bf16]

SHAPES = [(3, 4), (1,), (), (0, 5), (2, 3, 5), (7, 1, 3), (17, 33)]


def make(shape, dtype, low=-3.0, high=3.0, positive=False):
    if dtype == b8:
        return torch.rand(shape) > 0.5
    if dtype in (i64, i32):
        return torch.randint(-5, 6, shape, dtype=dtype)
    x = torch.empty(shape).uniform_(low, high)
    if positive:
        x = x.abs() + 0.1
    return x.to(dtype)


def transposed(shape, dtype, **kw):
    """A non-contiguous tensor of `shape` (a transposed view)."""
    if len(shape) < 2:
        return make(shape, dtype, **kw)
    base = make(shape[:-2] + (shape[-1], shape[-2]), dtype, **kw)
    return base.transpose(-1, -2)


COVERED = set()

# ------------------------------------------------------------------ unary
UNARY = [
    ("neg", torch.neg, FLOATS + [i64, i32], {}),
    ("abs", torch.abs, FLOATS + [i64, i32], {}),
    ("exp", torch.exp, FLOATS, {}),
    ("log", torch.log, FLOATS, {"positive": True}),
    ("log1p", torch.log1p, FLOATS, {"positive": True}),
    ("expm1", torch.expm1, FLOATS, {}),
    ("sqrt", torch.sqrt, FLOATS, {"positive": True}),
    ("rsqrt", torch.rsqrt, FLOATS, {"positive": True}),
    ("reciprocal", torch.reciprocal, FLOATS, {"positive": True}),
    ("sin", torch.sin, FLOATS, {}),
    ("cos", torch.cos, FLOATS, {}),
    ("tanh", torch.tanh, FLOATS, {}),
    ("erf", torch.erf, FLOATS, {}),
    ("sigmoid", torch.sigmoid, FLOATS, {}),
    ("relu", torch.relu, FLOATS + [i64, i32], {}),
    ("gelu", F.gelu, FLOATS, {}),
    ("gelu", lambda x: F.gelu(x, approximate="tanh"), FLOATS, {}),
    ("silu", F.silu, FLOATS, {}),
    ("hardswish", F.hardswish, FLOATS, {}),
    ("hardsigmoid", F.hardsigmoid, FLOATS, {}),
    ("floor", torch.floor, FLOATS, {}),
    ("ceil", torch.ceil, FLOATS, {}),
    ("clamp", lambda x: torch.clamp(x, -1.5, 0.5), FLOATS + [i64], {}),
    ("clamp", lambda x: torch.clamp(x, min=0.25), [f32], {}),
    ("clamp", lambda x: F.hardtanh(x), [f32], {}),
    ("logical_not", torch.logical_not, [b8, f32, i64], {}),
    ("isnan", torch.isnan, FLOATS, {}),
]


@pytest.mark.parametrize("op,fn,dtypes,kw", UNARY, ids=[f"{u[0]}-{i}" for i, u in enumerate(UNARY)])
def test_unary(op, fn, dtypes, kw):
    COVERED.add(op)
    for dtype in dtypes:
        for shape in SHAPES:
            check(fn, [make(shape, dtype, **kw)], covers=[op])
        check(fn, [transposed((4, 6), dtype, **kw)], covers=[op])


def test_cast_every_pair():
    COVERED.add("cast")
    for src in [f32, f16, bf16, i64, i32, b8]:
        for dst in [f32, f16, bf16, i64, i32, b8]:
            if src == dst:
                continue
            x = make((5, 3), src)
            if src in FLOATS and dst in (i64, i32):
                x = (x * 10).to(src)
            check(lambda t: t.to(dst), [x], covers=["cast"])


def test_prims_convert_element_type_is_a_cast():
    # What decompositions (and GPT-2's mask arithmetic) leave for dtype changes.
    for src, dst in [(f32, f16), (b8, f32), (i64, f32), (f32, i64), (bf16, f32)]:
        x = make((4, 3), src)
        check(lambda t: torch.ops.prims.convert_element_type(t, dst), [x], covers=["cast"])


# ------------------------------------------------------------------ binary
BIN_SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((), (2, 3)), ((0, 3), (1, 3)),
              ((5, 1, 6), (4, 1)), ((1,), (1,))]

BINARY = [
    ("add", torch.add, FLOATS + [i64, i32]),
    ("add", lambda a, b: torch.add(a, b, alpha=2), [f32, i64]),
    ("sub", torch.sub, FLOATS + [i64, i32]),
    ("mul", torch.mul, FLOATS + [i64, i32, b8]),
    ("div", torch.div, FLOATS),
    ("div", lambda a, b: torch.div(a, b, rounding_mode="floor"), [f32, i64, i32]),
    ("div", lambda a, b: torch.div(a, b, rounding_mode="trunc"), [f32, i64]),
    ("pow", lambda a, b: torch.pow(a.abs() + 0.5, b), [f32]),
    ("remainder", torch.remainder, [f32, i64]),
    ("maximum", torch.maximum, FLOATS + [i64]),
    ("minimum", torch.minimum, FLOATS + [i32]),
    ("eq", torch.eq, [f32, i64, b8]),
    ("ne", torch.ne, [f32, i64]),
    ("lt", torch.lt, [f32, i64, f16]),
    ("le", torch.le, [f32, i32]),
    ("gt", torch.gt, [f32, bf16]),
    ("ge", torch.ge, [f32, i64]),
    ("logical_and", torch.logical_and, [b8]),
    ("logical_or", torch.logical_or, [b8]),
    ("logical_and", lambda a, b: a & b, [b8]),
]


def _nonzero(b, dtype):
    if dtype in (i64, i32):
        return torch.where(b == 0, torch.ones_like(b), b)
    if dtype in FLOATS:
        return torch.where(b.abs() < 0.25, torch.full_like(b, 0.5), b)
    return b


@pytest.mark.parametrize("op,fn,dtypes", BINARY, ids=[f"{b[0]}-{i}" for i, b in enumerate(BINARY)])
def test_binary(op, fn, dtypes):
    COVERED.add(op)
    divides = op in ("div", "remainder")
    for dtype in dtypes:
        for sa, sb in BIN_SHAPES:
            a, b = make(sa, dtype), make(sb, dtype)
            if divides:
                b = _nonzero(b, dtype)
            check(fn, [a, b], covers=[op])
        a, b = transposed((4, 5), dtype), make((4, 5), dtype)
        check(fn, [a, _nonzero(b, dtype) if divides else b], covers=[op])


def test_binary_scalars_and_promotion():
    x = make((3, 4), f32)
    i = make((3, 4), i64)
    check(lambda t: t * 2.5 + 1 - 0.5, [x], covers=["mul", "add", "sub"])
    check(lambda t: 1.0 - t, [x], covers=["sub"])
    check(lambda t: t / 3, [i], covers=["div", "cast"])  # int / int -> float
    check(lambda t, u: t + u, [x, i], covers=["add", "cast"])  # promotion to float
    check(lambda t: t ** 2, [x], covers=["pow"])
    check(lambda t: 2 ** t, [x], covers=["pow"])
    y = make((5, 67), f32, positive=True)  # odd sizes: vector bodies and tails
    for e in (3, 2, 0.5, -0.5, -1, -2, 1.7):  # the special-cased exponents and a general one
        check(lambda t, e=e: t ** e, [y], covers=["pow"])
        check(lambda t, e=e: (-t) ** e if e in (3, 2, -1, -2) else t ** e, [y], covers=["pow"])
    check(lambda t: t < 0.5, [i], covers=["lt"])  # int tensor vs float scalar compares as float
    check(lambda t: t // 2, [i], covers=["div"])


def test_where_and_masked_fill():
    COVERED.add("where")
    for dtype in [f32, f16, i64, b8]:
        c = make((3, 4), b8)
        check(lambda m, a, b: torch.where(m, a, b), [c, make((3, 4), dtype), make((1, 4), dtype)], covers=["where"])
        check(lambda m, a: torch.where(m, a, 0), [make((2, 1, 4), b8), make((3, 4), dtype)], covers=["where"])
    x, m = make((2, 5), f32), make((2, 5), b8)
    check(lambda t, k: t.masked_fill(k, float("-inf")), [x, m], covers=["where"])
    check(lambda t, k: t.masked_fill(k, -1.0), [x, make((5,), b8)], covers=["where"])


# ------------------------------------------------------------------ reductions
RED_SHAPES = [((3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), (0, 2)), ((5,), 0), ((4, 0), 1), ((2, 3, 4), (-1, -2)),
              ((1, 1), None)]


@pytest.mark.parametrize("op,fn,dtypes", [
    ("reduce_sum", lambda x, d: x.sum(d) if d is not None else x.sum(), FLOATS + [i64, i32]),
    ("reduce_sum", lambda x, d: x.sum(d, keepdim=True) if d is not None else x.sum(), [f32]),
    ("reduce_mean", lambda x, d: x.mean(d) if d is not None else x.mean(), FLOATS),
    ("reduce_max", lambda x, d: x.amax(d) if d is not None else x.amax(), [f32, i64]),
    ("reduce_min", lambda x, d: x.amin(d, keepdim=True) if d is not None else x.amin(), [f32, i32]),
    ("reduce_prod", lambda x, d: x.prod(d if isinstance(d, int) else -1), [f32, i64]),
])
def test_reductions(op, fn, dtypes):
    COVERED.add(op)
    for dtype in dtypes:
        for shape, d in RED_SHAPES:
            if op in ("reduce_max", "reduce_min") and 0 in shape:
                continue  # max of nothing is an error in PyTorch too
            tol = {f32: dict(rtol=1e-5, atol=1e-4)}.get(dtype)
            check(lambda x: fn(x, d), [make(shape, dtype, low=0.5 if op == "reduce_prod" else -3.0, high=1.5 if op == "reduce_prod" else 3.0)], covers=[op], tol=tol)


def test_bool_reductions_and_max_dim():
    check(lambda x: x.sum(-1), [make((3, 4), b8)], covers=["reduce_sum"])
    check(lambda x: x.any(-1), [make((3, 4), b8)], covers=["reduce_sum"])  # a count of the true elements
    check(lambda x: x.all(), [make((3, 4), b8)], covers=["reduce_sum"])
    check(lambda x: torch.max(x, 1), [make((3, 4), f32)], covers=["reduce_max", "argmax"])
    check(lambda x: torch.min(x, -1, keepdim=True), [make((3, 4), f32)], covers=["reduce_min", "argmax"])


def test_argmax():
    COVERED.add("argmax")
    for dtype in [f32, i64]:
        check(lambda x: x.argmax(-1), [make((3, 7), dtype)], covers=["argmax"])
        check(lambda x: x.argmax(0, keepdim=True), [make((3, 7), dtype)], covers=["argmax"])
        check(lambda x: x.argmax(), [make((4, 5), dtype)], covers=["argmax"])
        check(lambda x: x.argmax(1), [transposed((3, 6), dtype)], covers=["argmax"])


def test_cumsum():
    COVERED.add("cumsum")
    for dtype in [f32, i64, i32]:
        for shape, d in [((5,), 0), ((3, 4), -1), ((2, 3, 4), 1), ((0, 3), 1)]:
            check(lambda x: x.cumsum(d), [make(shape, dtype)], covers=["cumsum"])
    check(lambda x: x.cumsum(-1), [make((3, 4), b8)], covers=["cumsum"])


# ------------------------------------------------------------------ normalization
def test_softmax_log_softmax():
    COVERED.update(["softmax", "log_softmax"])
    for dtype in FLOATS:
        for shape, d in [((3, 4), -1), ((2, 3, 4), 1), ((5,), 0), ((2, 1, 7), -1), ((0, 4), -1), ((4, 33), 0)]:
            check(lambda x: torch.softmax(x, d), [make(shape, dtype)], covers=["softmax"])
            check(lambda x: torch.log_softmax(x, d), [make(shape, dtype)], covers=["log_softmax"])
    x = make((2, 4), f32)
    x[0] = float("-inf")  # fully masked row: NaN, like eager
    check(lambda t: torch.softmax(t, -1), [x], covers=["softmax"])


def test_layer_norm():
    COVERED.add("layer_norm")
    for dtype in FLOATS:
        for shape, norm in [((3, 8), (8,)), ((2, 3, 16), (16,)), ((2, 4, 5), (4, 5)), ((1, 1), (1,)), ((0, 6), (6,)),
                            ((3, 37), (37,)), ((2, 384), (384,))]:  # 16-lane bodies with and without a tail
            w, b = make(norm, dtype), make(norm, dtype)
            check(lambda x, w, b: F.layer_norm(x, norm, w, b, 1e-5), [make(shape, dtype), w, b],
                  covers=["layer_norm"], tol={f32: dict(rtol=1e-4, atol=1e-4)}.get(dtype))
    check(lambda x: F.layer_norm(x, (6,)), [make((3, 6), f32)], covers=["layer_norm"], tol=dict(rtol=1e-4, atol=1e-4))


def test_rms_norm_op():
    COVERED.add("rms_norm")
    g = _C.Graph()
    x = g.add_input("x", "f32", [3, 8])
    w = g.add_input("w", "f32", [8])
    g.set_outputs(g.add_node("rms_norm", [x, w], {"normalized_ndim": 1, "eps": 1e-6}))
    xs, ws = make((3, 8), f32), make((8,), f32)
    (out,) = _C.Executable(g).run([xs, ws])
    ref = xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + 1e-6) * ws
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_batch_norm():
    COVERED.add("batch_norm")
    for dtype in [f32, bf16]:
        for shape in [(2, 3, 4, 5), (1, 3, 1, 1), (4, 3), (0, 3, 2, 2)]:
            c = shape[1]
            mean, var = make((c,), dtype), make((c,), dtype, positive=True)
            w, b = make((c,), dtype), make((c,), dtype)
            check(lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5),
                  [make(shape, dtype), mean, var, w, b], covers=["batch_norm"] if len(shape) == 4 and 0 not in shape else [])


# ------------------------------------------------------------------ linear algebra
def test_matmul_family():
    COVERED.update(["matmul", "addmm"])
    for dtype in FLOATS:
        tol = {f32: dict(rtol=1e-4, atol=1e-4)}.get(dtype)
        for m, k, n in [(1, 1, 1), (3, 5, 7), (17, 33, 65), (1, 64, 300), (0, 4, 5), (4, 0, 3)]:
            check(torch.mm, [make((m, k), dtype), make((k, n), dtype)], covers=["matmul"], tol=tol)
            check(lambda a, b: a @ b.t(), [make((m, k), dtype), make((n, k), dtype)], covers=["matmul"], tol=tol)
            check(lambda c, a, b: torch.addmm(c, a, b), [make((n,), dtype), make((m, k), dtype), make((k, n), dtype)],
                  covers=["addmm"], tol=tol)
        check(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
              [make((3, 1), dtype), make((3, 4), dtype), make((4, 6), dtype)], covers=["addmm"], tol=tol)
        # every bias layout the kernel broadcasts: scalar-like, row, full matrix; beta 0 and 1
        for bias_shape, beta in [((1,), 1.0), ((40, 1), 1.0), ((40, 33), 1.0), ((33,), 0.0), ((1, 33), 2.0)]:
            check(lambda c, a, b, beta=beta: torch.addmm(c, a, b, beta=beta),
                  [make(bias_shape, dtype), make((40, 9), dtype), make((9, 33), dtype)], covers=["addmm"], tol=tol)
        check(torch.bmm, [make((3, 5, 7), dtype), make((3, 7, 2), dtype)], covers=["matmul"], tol=tol)
        check(torch.matmul, [make((2, 3, 5, 7), dtype), make((7, 4), dtype)], covers=["matmul"], tol=tol)
        check(torch.matmul, [transposed((2, 6, 5), dtype), make((2, 5, 3), dtype)], covers=["matmul"], tol=tol)
        check(F.linear, [make((2, 3, 8), dtype), make((5, 8), dtype), make((5,), dtype)], tol=tol)
        # With passes on, weight transposes fold into the GEMM (trans_b) instead of copies.
        cg = check(F.linear, [make((7, 8), dtype), make((5, 8), dtype), make((5,), dtype)], tol=tol, passes=True)
        assert "permute" not in cg.report.zenith_ops, cg.report.zenith_ops
        check(lambda a, b: a @ b.transpose(-1, -2), [make((2, 3, 6), dtype), make((2, 5, 6), dtype)], tol=tol,
              passes=True)


def test_linear_activation_fuses():
    for act, name in [(F.gelu, "gelu"), (lambda t: F.gelu(t, approximate="tanh"), "gelu"), (torch.relu, "relu"),
                      (F.silu, "silu"), (torch.tanh, "tanh")]:
        cg = check(lambda x, w, b: act(F.linear(x, w, b)), [make((5, 8), f32), make((6, 8), f32), make((6,), f32)],
                   passes=True, tol=dict(rtol=1e-4, atol=1e-5))
        assert name not in cg.report.zenith_ops and cg.report.passes["fuse_epilogue"] == 1, cg.report.zenith_ops
    cg = check(lambda x, w, b: F.gelu(F.linear(x, w, b)), [make((2, 5, 8), f32), make((6, 8), f32), make((6,), f32)],
               passes=True, tol=dict(rtol=1e-4, atol=1e-5))  # 3-d input: a view sits between addmm and gelu
    assert "gelu" not in cg.report.zenith_ops
    # the raw linear output is also returned: no fusion, both values right
    cg = check(lambda x, w, b: (F.linear(x, w, b), torch.relu(F.linear(x, w, b))),
               [make((5, 8), f32), make((6, 8), f32), make((6,), f32)], passes=True, tol=dict(rtol=1e-4, atol=1e-5))
    assert cg.report.passes["fuse_epilogue"] == 0


def test_conv2d():
    COVERED.add("conv2d")
    cases = [
        dict(x=(1, 3, 9, 9), w=(8, 3, 3, 3), stride=1, padding=1),
        dict(x=(2, 4, 8, 7), w=(6, 4, 3, 2), stride=2, padding=0),
        dict(x=(1, 8, 10, 10), w=(8, 1, 3, 3), stride=1, padding=1, groups=8),  # depthwise
        # Depthwise on maps whose output rows are narrower than 32: groups of 8 or 16
        # channels at a time (21 and 37: a short last group), 5x5 with stride 2,
        # dilation, batches; and a 40-wide output row (the plane at a time).
        dict(x=(2, 21, 7, 7), w=(21, 1, 3, 3), stride=1, padding=1, groups=21),
        dict(x=(3, 37, 14, 13), w=(37, 1, 5, 5), stride=2, padding=2, groups=37),
        dict(x=(1, 17, 10, 12), w=(17, 1, 3, 3), stride=1, padding=2, dilation=2, groups=17, bias=False),
        dict(x=(1, 5, 6, 40), w=(5, 1, 3, 3), stride=1, padding=1, groups=5),
        dict(x=(1, 8, 6, 6), w=(4, 2, 1, 1), stride=1, padding=0, groups=4),  # grouped 1x1
        dict(x=(1, 3, 7, 7), w=(5, 3, 1, 1), stride=1, padding=0),  # pointwise
        dict(x=(1, 2, 9, 9), w=(3, 2, 3, 3), stride=1, padding=2, dilation=2),
        dict(x=(1, 3, 5, 5), w=(4, 3, 5, 5), stride=3, padding=2, bias=False),
        # One image: B's panels are built from the image (implicit GEMM). 288 rows (two
        # k blocks, the second starting inside a channel), 143 columns (panels crossing
        # output rows); conv1-like stride 2 with runs clipped at both edges; grouped with
        # a stride and padding per axis; a kernel larger than the image; 260 output
        # channels over 400 columns (taller than one L2 block: im2col in memory instead).
        dict(x=(1, 32, 11, 13), w=(10, 32, 3, 3), stride=1, padding=1),
        dict(x=(1, 3, 23, 29), w=(8, 3, 7, 7), stride=2, padding=3),
        dict(x=(1, 4, 9, 40), w=(6, 2, 3, 5), stride=(1, 2), padding=(0, 2), groups=2),
        dict(x=(1, 2, 4, 4), w=(3, 2, 5, 5), stride=1, padding=3),
        dict(x=(1, 3, 20, 20), w=(260, 3, 3, 3), stride=1, padding=1),
        # Few input channels on maps of 32 x 32+ outputs: the direct conv (stems):
        # 7x7 / 2 with a partial panel of output channels and a part tile per row,
        # 3x3 / 2, and 2 channels with dilation on one axis; a batch.
        dict(x=(2, 3, 70, 66), w=(13, 3, 7, 7), stride=2, padding=3),
        dict(x=(1, 3, 64, 64), w=(10, 3, 3, 3), stride=2, padding=1, bias=False),
        dict(x=(1, 2, 40, 50), w=(5, 2, 5, 5), stride=1, padding=2, dilation=(1, 2)),
        # 3x3, stride 1, padding 1, 64+ channels on a 13 x 12 map: Winograd F(2x2, 3x3)
        # (odd height: a clipped last row of tiles) where the call has 128+ tiles, its
        # filters (an input here) transformed for the call: 130 output channels in NCHW,
        # 64 over the blocked layout; one image (42 tiles): the GEMM. Sums of 1152
        # products (outputs up to ~100): 5e-4 absolute is about 5 ulp of the largest.
        dict(x=(1, 128, 13, 12), w=(130, 128, 3, 3), stride=1, padding=1, atol=5e-4),
        dict(x=(4, 128, 13, 12), w=(130, 128, 3, 3), stride=1, padding=1, atol=5e-4),
        dict(x=(4, 64, 13, 12), w=(64, 64, 3, 3), stride=1, padding=1, atol=5e-4),
        # Batches with small maps run as one GEMM over all images' columns; 24 x 24
        # (576 columns) per image.
        dict(x=(3, 5, 7, 7), w=(6, 5, 1, 1), stride=1, padding=0),
        dict(x=(4, 3, 9, 9), w=(7, 3, 3, 3), stride=1, padding=1, bias=False),
        dict(x=(2, 2, 24, 24), w=(3, 2, 3, 3), stride=1, padding=1),
        # ... B's panels built from the images: 30 columns per image (panels cross
        # images and output rows), stride, dilation, padding per axis; 288 rows (two k
        # blocks, the second starting inside a channel); a 1x1 stride-2 conv. 520 output
        # channels (more than one block of A's rows: the columns im2col'd in memory,
        # stride 2, clipped at the edges).
        dict(x=(3, 5, 9, 11), w=(7, 5, 3, 3), stride=2, padding=(1, 2), dilation=(1, 2)),
        dict(x=(2, 32, 10, 9), w=(9, 32, 3, 3), stride=1, padding=1),
        dict(x=(3, 6, 9, 9), w=(10, 6, 1, 1), stride=2, padding=0, bias=False),
        dict(x=(2, 3, 29, 29), w=(520, 3, 3, 3), stride=2, padding=1),
    ]
    for dtype in [f32, bf16]:
        for c in cases:
            w = make(c["w"], dtype)
            b = make((c["w"][0],), dtype) if c.get("bias", True) else None
            kw = dict(stride=c["stride"], padding=c["padding"], dilation=c.get("dilation", 1), groups=c.get("groups", 1))
            tol = {f32: dict(rtol=1e-4, atol=c.get("atol", 1e-4))}.get(dtype)
            if b is None:
                check(lambda x, w: F.conv2d(x, w, None, **kw), [make(c["x"], dtype), w], covers=["conv2d"], tol=tol)
            else:
                check(lambda x, w, b: F.conv2d(x, w, b, **kw), [make(c["x"], dtype), w, b], covers=["conv2d"], tol=tol)


def test_conv1d():
    """conv1d (Whisper's and wav2vec2's front ends) runs as a conv2d over one row: a
    reshape of x and w, the conv with stride, padding and dilation on the width, a reshape
    back. Cases: Whisper's k3 pair (the second stride 2), wav2vec2's first layer (1
    channel, k10 / 5) and its grouped positional conv (k128, padding 64, 16 groups, an
    output one longer than the input), depthwise, dilation with an odd length, no bias;
    then a chain with GELU (passes on), against eager in float32 and bfloat16."""
    cases = [
        dict(x=(1, 80, 50), w=(64, 80, 3), stride=1, padding=1),
        dict(x=(2, 64, 51), w=(64, 64, 3), stride=2, padding=1),
        dict(x=(1, 1, 400), w=(16, 1, 10), stride=5, padding=0, bias=False),
        dict(x=(1, 32, 37), w=(32, 2, 128), stride=1, padding=64, groups=16),
        dict(x=(2, 12, 29), w=(12, 1, 5), stride=1, padding=2, groups=12),
        dict(x=(1, 9, 31), w=(7, 9, 3), stride=3, padding=4, dilation=2, bias=False),
    ]
    for dtype in [f32, bf16]:
        tol = {f32: dict(rtol=1e-4, atol=1e-4)}.get(dtype)
        for c in cases:
            w = make(c["w"], dtype)
            kw = dict(stride=c["stride"], padding=c["padding"], dilation=c.get("dilation", 1), groups=c.get("groups", 1))
            if c.get("bias", True):
                check(lambda x, w, b: F.conv1d(x, w, b, **kw), [make(c["x"], dtype), w, make((c["w"][0],), dtype)],
                      covers=["conv2d"], tol=tol)
            else:
                check(lambda x, w: F.conv1d(x, w, None, **kw), [make(c["x"], dtype), w], covers=["conv2d"], tol=tol)

    def front(x, w1, b1, w2, b2):  # Whisper's encoder front end
        return F.gelu(F.conv1d(F.gelu(F.conv1d(x, w1, b1, padding=1)), w2, b2, stride=2, padding=1)).transpose(1, 2)

    check(front, [make((1, 20, 33), f32), make((24, 20, 3), f32), make((24,), f32), make((24, 24, 3), f32),
                  make((24,), f32)], covers=["conv2d"], passes=True, tol=dict(rtol=1e-4, atol=1e-4))
    # a module's filters, reshaped on their way to the conv, are still its weights: packed once
    import zenith

    m = torch.nn.Sequential(torch.nn.Conv1d(64, 48, 3, padding=1), torch.nn.GELU(), torch.nn.Conv1d(48, 32, 3)).eval()
    r = zenith.explain(m, make((1, 64, 200), f32))
    assert not r.fallback_ops and r.packed_weight_bytes == 4 * (48 * 64 * 3 + 32 * 48 * 3), r.packed_weight_bytes


def test_upsample2d():
    """F.interpolate's nearest, nearest-exact and bilinear (align_corners both ways) on
    NCHW maps, by size and by scale factor, against eager: up and down, integer and
    fractional factors (torch's index arithmetic reads the factor, not only the size),
    twice and the same size (nearest's special cases), one-pixel outputs and inputs,
    odd sizes, recompute_scale_factor, a batch; bfloat16 through float32."""
    COVERED.add("upsample2d")
    cases = [dict(size=(17, 23)), dict(size=(1, 5)), dict(size=(9, 9)), dict(size=(18, 20)), dict(scale_factor=2.0),
             dict(scale_factor=0.5), dict(scale_factor=1.7), dict(scale_factor=(3.0, 0.75)),
             dict(scale_factor=1.3, recompute_scale_factor=True), dict(scale_factor=1.0),
             dict(scale_factor=2.05)]  # 9 x 10 -> 18 x 20: twice the size, not by a factor of 2
    for dtype in [f32, bf16]:
        for shape in [(2, 3, 9, 10), (1, 4, 2, 7)]:
            x = make(shape, dtype)
            for mode in ["nearest", "nearest-exact", "bilinear"]:
                for kw in cases:
                    for align in ([False, True] if mode == "bilinear" else [None]):
                        extra = {} if align is None else {"align_corners": align}
                        check(lambda t: F.interpolate(t, mode=mode, **kw, **extra), [x], covers=["upsample2d"],
                              tol={f32: dict(rtol=1e-5, atol=1e-6)}.get(dtype))
    for mode, extra in [("nearest", {}), ("nearest-exact", {}), ("bilinear", {"align_corners": False}),
                        ("bilinear", {"align_corners": True})]:  # a one-pixel input
        check(lambda t: F.interpolate(t, size=(3, 4), mode=mode, **extra), [make((1, 2, 1, 1), f32)],
              covers=["upsample2d"])
    # a segmentation head's: 1x1 conv logits up to the image
    check(lambda t, w: F.interpolate(F.conv2d(t, w), size=(40, 36), mode="bilinear", align_corners=False),
          [make((1, 8, 10, 9), f32), make((5, 8, 1, 1), f32)], covers=["upsample2d"], tol=dict(rtol=1e-4, atol=1e-5))


def test_sdpa():
    COVERED.add("sdpa")
    # Few queries run whole score rows; from 8 (6 with AVX2) the tiled kernel, whose key
    # tiles (128 / 192 keys) are crossed by S = 300 and 130.
    for B, H, Hk, L, S, E in [(1, 2, 2, 5, 5, 8), (2, 4, 2, 3, 7, 16), (1, 1, 1, 1, 9, 4), (1, 8, 1, 6, 6, 8),
                              (1, 4, 2, 40, 300, 64), (2, 3, 3, 130, 130, 33)]:
        # Long rows sum in another order than eager's: both sit ~3e-6 from a float64 run.
        tol = dict(rtol=1e-4, atol=1e-5 if S < 100 else 3e-5)
        q, k, v = make((B, H, L, E), f32), make((B, Hk, S, E), f32), make((B, Hk, S, E), f32)
        gqa = H != Hk
        check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa), [q, k, v], covers=["sdpa"], tol=tol)
        if L == S:
            check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa), [q, k, v],
                  covers=["sdpa"], tol=tol)
        bmask = make((B, 1, L, S), b8)
        bmask[..., 0] = True  # no fully masked rows
        check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=gqa), [q, k, v, bmask],
              covers=["sdpa"], tol=tol)
        fmask = make((L, S), f32)
        check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3, enable_gqa=gqa),
              [q, k, v, fmask], covers=["sdpa"], tol=tol)


# ------------------------------------------------------------------ pooling
def test_pooling():
    COVERED.update(["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"])
    for dtype in [f32, bf16]:
        for shape in [(1, 3, 9, 9), (2, 2, 8, 7), (1, 1, 3, 3), (3, 5, 5)]:
            x = make(shape, dtype)
            check(lambda t: F.max_pool2d(t, 3, 2, 1), [x], covers=["max_pool2d"])
            check(lambda t: F.max_pool2d(t, 2, ceil_mode=True), [x], covers=["max_pool2d"])
            check(lambda t: F.avg_pool2d(t, 3, 2, 1), [x], covers=["avg_pool2d"])
            check(lambda t: F.avg_pool2d(t, 2, 1, 1, count_include_pad=False), [x], covers=["avg_pool2d"])
            check(lambda t: F.adaptive_avg_pool2d(t, (2, 3)), [x], covers=["adaptive_avg_pool2d"])
            check(lambda t: F.adaptive_avg_pool2d(t, 1), [x])  # PyTorch lowers this one to a mean


# ------------------------------------------------------------------ data movement
def test_reshape_family():
    COVERED.add("reshape")
    for dtype in [f32, i64, b8, f16]:
        x = make((2, 3, 4), dtype)
        check(lambda t: t.view(6, 4) + t.view(6, 4), [x] if dtype != b8 else [x.float()], covers=["reshape"])
        check(lambda t: t.reshape(-1), [x], covers=["reshape"])
        check(lambda t: t.unsqueeze(-1).squeeze(0) if t.shape[0] == 1 else t.unsqueeze(1), [x], covers=["reshape"])
        check(lambda t: t.flatten(1), [x], covers=["reshape"])
        check(lambda t: t.reshape(3, 8), [transposed((2, 3, 4), dtype)], covers=["reshape"])
        check(lambda t: t.reshape(0, 3), [make((0, 3), dtype)], covers=["reshape"])


def test_copy_permute_expand():
    COVERED.update(["copy", "permute", "expand"])
    for dtype in [f32, i64, b8, bf16]:
        x = make((2, 3, 4), dtype)
        check(lambda t: t.clone(), [x], covers=["copy"])
        check(lambda t: t.permute(2, 0, 1), [x], covers=["permute"])
        check(lambda t: t.transpose(-1, -3), [x], covers=["permute"])
        check(lambda t: t.t(), [make((3, 5), dtype)], covers=["permute"])
        check(lambda t: t.expand(2, 3, 4), [make((3, 1), dtype)], covers=["expand"])
        check(lambda t: t.expand(4, -1, 5), [make((1, 3, 1), dtype)], covers=["expand"])
        check(lambda t: t.permute(1, 0), [make((0, 3), dtype)], covers=["permute"])


def test_slice_select_split():
    COVERED.add("slice")
    for dtype in [f32, i64, b8]:
        x = make((5, 6, 7), dtype)
        check(lambda t: t[1:4], [x], covers=["slice"])
        check(lambda t: t[:, ::2], [x], covers=["slice"])
        check(lambda t: t[..., -3:], [x], covers=["slice"])
        check(lambda t: t[:, 2], [x], covers=["slice"])
        check(lambda t: t[-1], [x], covers=["slice"])
        check(lambda t: t[:, 10:], [x], covers=["slice"])  # empty
        check(lambda t: t.split(2, dim=-1), [x], covers=["slice"])
        check(lambda t: t.chunk(3, dim=1), [x], covers=["slice"])
        check(lambda t: t[1:3, 1:], [transposed((5, 6), dtype)], covers=["slice"])


def test_slice_writes_and_swin_masks():
    """Writes into slices (functionalized to aten.copy / fill.Tensor + slice_scatter) run as
    slices and a cat: Swin's shifted-window mask (a zeros map, regions filled with a
    count), `y[:, a:b] = v` with negative and past-the-end bounds, a write covering the
    whole dim and an empty one, `y[i] = v` (select_scatter, a negative index too);
    zero_(), clamp_min / clamp_max (F.normalize), integer fmod (Swin's (i + shift) % size,
    negative operands, divisor +-1), repeat (BLOOM's ALiBi), an as_strided that is a
    reshape, and flip (size-1, empty and 0-d)."""
    def swin_mask(x):
        m = x.new_zeros(9, 10)
        c = 0
        for h in (slice(0, -3), slice(-3, -1), slice(-1, None)):
            for w in (slice(0, -4), slice(-4, -2), slice(-2, None)):
                m[h, w] = c
                c += 1
        return m.reshape(3, 3, 5, 2) + x.sum()

    # functionalized as AOTAutograd does (make_fx alone would keep fill_ and copy_)
    fn = torch.func.functionalize
    check(fn(swin_mask), [make((3,), f32)], covers=["cat"])
    for dtype in [f32, i64, b8]:
        x, v = make((4, 6, 5), dtype), make((4, 2, 5), dtype)

        def writes(t, u):
            y = t.clone()
            y[:, 1:3] = u
            y[..., -2:] = t[..., :2]
            y[:, 4:100] = t[:, :2]
            y[1:1] = t[:0]
            return y

        def whole(t, u):  # a full slice traces to aten.copy of the new values (no slice_scatter)
            y = t.clone()
            y[:, :] = t[[3, 2, 1, 0]]
            y[1].copy_(u[0, 0])  # aten.copy broadcasting a row over a selected slice (select_scatter)
            y[:, -1, 2] = t[0, 0, 0]
            return y, torch.slice_scatter(t, t * 2, dim=1, start=0)  # src covering the whole dim

        check(fn(writes), [x, v], covers=["cat"])
        check(fn(whole), [x, v])
        check(lambda t: t.repeat(2, 1, 3), [x])
        check(lambda t: t.repeat(2, 3, 1, 2), [x])
        check(lambda t: (t.flip(0), t.flip((-1, 1)), t[:1].flip(0), t[:, :0].flip(1), t[0, 0, 0].flip(0)), [x])
    for dtype in [i64, i32]:
        i = torch.arange(-13, 13, dtype=dtype)
        check(lambda t: torch.fmod(t + 3, 5) + torch.fmod(t - 7, -4) + torch.fmod(t, 1) + torch.fmod(t, -1), [i])
    x = make((4, 6, 5), f32)
    check(lambda t: F.normalize(t, dim=-1) + t.clamp_max(0.5) + t.clamp_min(-0.25), [x], covers=["clamp"])
    check(fn(lambda t: torch.zero_(t.clone()[1:]) + t[:3]), [x])
    check(lambda t: torch.as_strided(t.mean(2, keepdim=True) * 2, (4, 6, 1, 1), (6, 1, 6, 6)) + 1, [x])


def test_var_std_group_norm_weight_norm():
    """What torch's reference decompositions leave for var / std / var_mean and so for
    GroupNorm (prims.var, prims.sum, prims.broadcast_in_dim, prims.div) runs natively:
    corrections 0, 1 and 2, several dims, all dims, 16-bit inputs (computed in float32);
    GroupNorm over 4-d and 3-d inputs (wav2vec2's, one channel a group), with a channel
    count not a multiple of 8; weight norm (wav2vec2's positional conv) decomposed."""
    for dtype in [f32, bf16]:
        tol = {f32: dict(rtol=1e-5, atol=1e-5)}.get(dtype)
        x = make((4, 6, 5), dtype)
        check(lambda t: t.var(1) + t.std(-2, correction=0), [x], tol=tol)
        check(lambda t: torch.var_mean(t, (0, 2), correction=2)[0] * torch.var_mean(t, (0, 2))[1], [x], tol=tol)
        check(lambda t: t.std() + t.var(dim=None, correction=0), [x], tol=tol)
    for shape, groups in [((2, 12, 5, 7), 4), ((1, 16, 50), 16), ((3, 10, 9), 5)]:
        x, g, b = make(shape, f32), make((shape[1],), f32), make((shape[1],), f32)
        check(lambda t, w, c: F.group_norm(t, groups, w, c, eps=1e-5), [x, g, b], tol=dict(rtol=1e-4, atol=1e-4))
    v, gain = make((6, 4, 3), f32), make((1, 1, 3), f32)
    check(lambda t, s: torch._weight_norm(t, s, dim=2), [v, gain], tol=dict(rtol=1e-5, atol=1e-5))


def test_cat_stack_pad():
    COVERED.update(["cat", "pad"])
    for dtype in [f32, i64, b8]:
        a, b, c = make((2, 3), dtype), make((2, 5), dtype), make((2, 0), dtype)
        check(lambda x, y, z: torch.cat([x, y, z], -1), [a, b, c], covers=["cat"])
        check(lambda x, y: torch.cat([x, y], 0), [a, make((4, 3), dtype)], covers=["cat"])
        check(lambda x, y: torch.stack([x, y], 1), [a, make((2, 3), dtype)], covers=["cat"])
    for dtype in [f32, i64]:
        x = make((2, 3, 4), dtype)
        check(lambda t: F.pad(t, (1, 2)), [x], covers=["pad"])
        check(lambda t: F.pad(t, (1, 0, 0, 2), value=3), [x], covers=["pad"])
        check(lambda t: F.pad(t, (-1, 1, 2, -1)), [x], covers=["pad"])


def test_indexing():
    COVERED.update(["embedding", "index_select", "gather"])
    for dtype in [f32, bf16, i64]:
        w = make((10, 4), dtype)
        for idx_dtype in [i64, i32]:
            idx = torch.randint(0, 10, (2, 3), dtype=idx_dtype)
            check(lambda w, i: F.embedding(i, w), [w, idx], covers=["embedding"])
        x = make((4, 5, 6), dtype)
        i = torch.tensor([3, 0, 3, -1 + 5])
        check(lambda t, i: t.index_select(1, i), [x, i], covers=["index_select"])
        check(lambda t, i: t[:, i], [x, torch.tensor([[0, 4], [1, 1]])], covers=["index_select"])
        check(lambda t, i: t[i], [x, torch.tensor([2, -1])], covers=["index_select"])
        gi = torch.randint(0, 6, (4, 5, 3))
        check(lambda t, i: t.gather(-1, i), [x, gi], covers=["gather"])


def test_advanced_index():
    COVERED.add("index")
    for dtype in [f32, i64, b8]:
        x = make((4, 5, 6), dtype)
        a, b = torch.tensor([[0, 3], [1, 2]]), torch.tensor([4, -1])
        check(lambda t, i, j: t[i, j], [x, a, b], covers=["index"])  # adjacent, leading
        check(lambda t, i, j: t[:, i, j], [x, a, torch.tensor([5, 0])], covers=["index"])  # adjacent, inner
        check(lambda t, i, j: t[i, :, j], [x, a, b], covers=["index"])  # non-adjacent: broadcast dims first
        check(lambda t, i, j, k: t[i, j, k], [x, torch.tensor([1]), torch.tensor([[0], [4]]), torch.tensor([2, 3, 5])],
              covers=["index"])
        check(lambda t, i, j: t[i, j], [x, torch.zeros(0, dtype=i64), torch.zeros(0, dtype=i64)], covers=["index"])


def test_tril_triu():
    COVERED.add("tril")
    for dtype in [f32, b8, i64]:
        for d in [0, 1, -2]:
            x = make((2, 4, 5), dtype)
            check(lambda t: t.tril(d), [x], covers=["tril"])
            check(lambda t: t.triu(d), [x], covers=["tril"])


def test_sources():
    COVERED.update(["full", "arange"])
    x = make((3, 4), f32)
    check(lambda t: t + torch.ones(3, 4), [x], covers=["full"])
    check(lambda t: t + torch.zeros_like(t), [x], covers=["full"])
    check(lambda t: torch.full_like(t, 2.5, dtype=torch.bfloat16), [x], covers=["full"])
    check(lambda t: t.new_full((2, 2), 7), [make((1,), i64)], covers=["full"])
    check(lambda t: t + torch.arange(4), [x], covers=["arange"])
    check(lambda t: torch.arange(2, 11, 3) * t[0, 0], [x], covers=["arange"])
    check(lambda t: torch.arange(0.0, 1.0, 0.25) + t[:, :1], [x], covers=["arange"])


def test_sym_value_uses_sizes_as_numbers():
    """A size used as a number (an HF decoder's positions: arange(new) + past) is sym_value,
    evaluated per call from the shapes: traced symbolically, run at other sizes, exact."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from zenith.importer import decomposition_table
    from zenith.partition import CompiledGraph

    COVERED.add("sym_value")

    def f(x, p):
        return x * 2 + torch.arange(x.shape[0]) + p.shape[1], (x.shape[0] * p.shape[1]) - x.float(), x < p.shape[1]

    gm = make_fx(f, tracing_mode="symbolic", decomposition_table=decomposition_table())(torch.arange(5), make((2, 7), f32))
    cg = CompiledGraph(gm, {"passes": True, "verify": True})
    assert cg.report.nodes_native == cg.report.nodes_total, cg.report.fallback_ops
    assert cg.report.zenith_ops.get("sym_value", 0) >= 2, cg.report.zenith_ops
    for n, m in [(5, 7), (3, 2), (9, 11), (1, 1), (0, 4)]:
        x, p = torch.arange(n) - 2, make((2, m), f32)
        for got, want in zip(cg([x, p]), f(x, p)):
            assert got.dtype == want.dtype and torch.equal(got, want), (n, m, got, want)


def test_constants_fold_when_passes_run():
    COVERED.add("constant")
    cg = check(lambda t: t * (torch.arange(4) * 2 + 1), [make((3, 4), f32)], passes=True)
    assert "constant" in cg.report.zenith_ops
    assert "arange" not in cg.report.zenith_ops
    assert cg.report.passes["constant_folding"] >= 1


def test_conv_batch_norm_relu_batched():
    """conv + inference batch-norm + ReLU fused into the conv (passes on), on a batch of
    small maps (the one-GEMM batched path) and on one image, against eager."""
    params = [make((6, 4, 3, 3), f32), make((6,), f32), make((6,), f32), make((6,), f32).abs() + 0.5,
              make((6,), f32), make((6,), f32)]

    def f(x, w, b, mean, var, g, beta):
        y = F.conv2d(x, w, b, padding=1)
        return torch.relu(F.batch_norm(y, mean, var, g, beta, training=False, eps=1e-5))

    for shape in [(5, 4, 7, 7), (1, 4, 7, 7)]:
        cg = check(f, [make(shape, f32)] + params, covers=["conv2d"], passes=True, tol=dict(rtol=1e-4, atol=1e-4))
        assert "batch_norm" not in cg.report.zenith_ops and "relu" not in cg.report.zenith_ops  # all in the conv


def test_conv2d_winograd_over_the_blocked_layout():
    """A lone 3x3 stride-1 conv on whole channel blocks (64 channels) runs conv2d's
    Winograd over the blocked layout, the image, the residual and the output converted:
    with batch-norm, a residual and ReLU in its epilogue, its filters an input (transformed
    for the call: 4 images of 13 x 12, 168 tiles; one image of 9 x 9 runs the GEMM) and
    constant (transformed once, any batch); a NaN and an infinity kept to their windows
    (those images by the direct conv). Against eager."""
    c = 64
    bn = [make((c,), f32), make((c,), f32).abs() + 0.5, make((c,), f32), make((c,), f32)]

    def block(x, w, mean, var, g, beta):
        y = F.batch_norm(F.conv2d(x, w, None, padding=1), mean, var, g, beta, training=False, eps=1e-5)
        return torch.relu(y + x)

    tol = dict(rtol=1e-4, atol=5e-4)
    for shape in [(4, c, 13, 12), (1, c, 9, 9)]:
        x = make(shape, f32)
        cg = check(block, [x, make((c, c, 3, 3), f32)] + bn, covers=["conv2d"], passes=True, tol=tol)
        assert set(cg.report.zenith_ops) == {"conv2d"}, cg.report.zenith_ops  # bn, add and relu in its epilogue
    x = make((4, c, 13, 12), f32)
    x[0, 5, 3, 9], x[2, 60, 12, 0] = float("nan"), float("inf")
    check(block, [x, make((c, c, 3, 3), f32)] + bn, covers=["conv2d"], passes=True, tol=tol)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU()).eval()
    m[1].running_mean.normal_()
    m[1].running_var.uniform_(0.5, 2.0)
    f = zenith.freeze(m)
    for x in (make((1, c, 9, 9), f32), make((3, c, 14, 14), f32)):
        assert set(zenith.explain(m, x).zenith_ops) == {"conv2d"}
        with torch.no_grad():
            torch.testing.assert_close(f(x), m(x), **tol)


def test_conv_residual_add_relu():
    """A ResNet block's tail, relu(bn(conv(x)) + identity), and a downsample block's,
    relu(bn(conv(y)) + conv(x)), run as convs whose epilogue adds the residual (passes
    on: no add, no relu left), against eager: one image (implicit GEMM and pointwise
    paths), a batch of small maps (residual applied while copying out), and a depthwise
    conv with a residual."""
    c = 6

    def block(x, w1, w2, mean, var, g, beta):
        y = F.batch_norm(F.conv2d(x, w1, None, padding=1), mean, var, g, beta, training=False, eps=1e-5)
        return torch.relu(y + x)

    def downsample(x, w1, w2, mean, var, g, beta):
        y = F.conv2d(torch.relu(F.conv2d(x, w1, None, padding=1)), w2, None)
        main = F.batch_norm(y, mean, var, g, beta, training=False, eps=1e-5)
        return torch.relu(main + F.conv2d(x, w2, None))

    def depthwise(x, w1, w2, mean, var, g, beta):
        return torch.relu(F.conv2d(x, w1[:, :1], None, padding=1, groups=c) + x)

    tol = dict(rtol=1e-4, atol=1e-4)
    bn = [make((c,), f32), make((c,), f32).abs() + 0.5, make((c,), f32), make((c,), f32)]
    for shape in [(1, c, 9, 11), (3, c, 7, 7)]:
        inputs = [make(shape, f32), make((c, c, 3, 3), f32), make((c, c, 1, 1), f32)] + bn
        for f in (block, downsample, depthwise):
            cg = check(f, inputs, covers=["conv2d"], passes=True, tol=tol)
            assert "add" not in cg.report.zenith_ops and "relu" not in cg.report.zenith_ops, (f, cg.report.zenith_ops)
            assert cg.report.passes["fuse_conv_residual"] >= 1


def bn_of(e):
    """An inference batch-norm's mean, var (positive), weight and bias for e channels."""
    return [make((e,), f32), make((e,), f32).abs() + 0.5, make((e,), f32), make((e,), f32)]


def relu6(t):
    return F.hardtanh(t, 0.0, 6.0)


def test_blocked_layout_convs(monkeypatch):
    """The blocked channel layout (on by default, any batch): a chain of ungrouped convs runs
    as conv2d_nchwc with blocked tensors between them, against eager: odd channel counts
    (not whole blocks), strides 1 and 2, padding 0 to 2, dilation 2, 1x1 / 3x3 / 5x3
    kernels, bias with and without batch-norm, a residual add, ReLU and SiLU, batches of 1
    and 3, and a conv with few input channels first (a stem: it reads the NCHW input and
    writes the blocked layout itself, so no to_nchwc remains)."""
    monkeypatch.delenv("ZENITH_NCHWC", raising=False)
    COVERED.update({"conv2d_nchwc", "to_nchwc", "from_nchwc"})
    tol = dict(rtol=1e-4, atol=1e-4)

    def f(x, w0, w1, b1, w2, m2, v2, g2, be2, w3, b3, w4):
        y = torch.relu(F.conv2d(x, w0, padding=1))  # 3 channels in: the stem, over NCHW x
        y = F.silu(F.conv2d(y, w1, b1, stride=2, padding=2, dilation=2))
        z = F.batch_norm(F.conv2d(y, w2, None, padding=(2, 1)), m2, v2, g2, be2, training=False, eps=1e-5)
        z = torch.relu(F.conv2d(torch.relu(z), w3, b3) + y)
        return F.conv2d(z, w4, stride=2)

    for n, h, w in ((1, 23, 19), (3, 16, 16)):
        def wt(*shape):  # fan-in scaled, so values stay near 1 through the chain
            return make(shape, f32) / (shape[1] * shape[2] * shape[3]) ** 0.5

        inputs = [make((n, 3, h, w), f32), wt(17, 3, 3, 3), wt(40, 17, 3, 3), make((40,), f32), wt(33, 40, 5, 3)]
        inputs += bn_of(33) + [wt(40, 33, 1, 1), make((40,), f32), wt(24, 40, 1, 1)]
        check(f, inputs, covers=["conv2d_nchwc", "from_nchwc"], passes=True, tol=tol)


def test_blocked_layout_depthwise():
    """Depthwise convs between blocked 1x1 convs join the blocked layout (on by default for
    a static batch): MobileNet-style blocks on maps too small for conv2d_pw_dw, expand ->
    depthwise -> project (+ residual), run as conv2d_nchwc end to end, against eager: odd
    channel counts (not whole blocks), odd map sizes, 3x3 stride 1 and 5x5 stride 2
    depthwise filters, ReLU6 and Hardswish, batches 1 and 3."""
    COVERED.update({"conv2d_nchwc", "to_nchwc", "from_nchwc"})
    tol = dict(rtol=1e-4, atol=1e-4)

    def f(x, we1, wd1, bd1, wp1, we2, wd2, wp2, bp2):
        y = F.relu6(F.conv2d(x, we1))
        y = F.relu6(F.conv2d(y, wd1, bd1, padding=1, groups=wd1.shape[0]))
        x = F.conv2d(y, wp1) + x
        y = F.hardswish(F.conv2d(x, we2))
        y = F.hardswish(F.conv2d(y, wd2, stride=2, padding=2, groups=wd2.shape[0]))
        return F.conv2d(y, wp2, bp2)

    for n, h, w in ((1, 13, 11), (3, 14, 14)):
        def wt(*shape):  # fan-in scaled, so values stay near 1 through the chain
            return make(shape, f32) / (shape[1] * shape[2] * shape[3]) ** 0.5

        inputs = [make((n, 20, h, w), f32), wt(60, 20, 1, 1), wt(60, 1, 3, 3), make((60,), f32), wt(20, 60, 1, 1)]
        inputs += [wt(36, 20, 1, 1), wt(36, 1, 5, 5), wt(24, 36, 1, 1), make((24,), f32)]
        cg = check(f, inputs, covers=["conv2d_nchwc", "to_nchwc", "from_nchwc"], passes=True, tol=tol)
        assert "conv2d" not in cg.report.zenith_ops, cg.report.zenith_ops  # every conv blocked


def test_blocked_layout_max_pool():
    """A max pooling between a stem and blocked convs (ResNet's stem -> max_pool2d -> layer 1)
    runs blocked (max_pool2d_nchwc; on by default for a static batch), the stem writing the
    blocked layout and nothing converting in, against eager: channels not whole blocks,
    3x3 / 2 with padding, 2x2 / 2 in ceil mode (a last window past the edge), odd maps,
    batches 1 and 3, the pooled map also returned (converted out)."""
    COVERED.add("max_pool2d_nchwc")
    tol = dict(rtol=1e-4, atol=1e-4)

    def f(x, w0, w1, b1, w2):
        y = torch.relu(F.conv2d(x, w0, stride=2, padding=1))
        p = F.max_pool2d(y, 3, 2, 1)
        z = F.max_pool2d(torch.relu(F.conv2d(p, w1, b1)), 2, 2, ceil_mode=True)
        return F.conv2d(torch.relu(F.conv2d(z, w2, padding=1)), w2, padding=1), p

    for n, h, w in ((1, 45, 39), (3, 36, 36)):
        def wt(*shape):  # fan-in scaled, so values stay near 1 through the chain
            return make(shape, f32) / (shape[1] * shape[2] * shape[3]) ** 0.5

        inputs = [make((n, 3, h, w), f32), wt(20, 3, 3, 3), wt(24, 20, 1, 1), make((24,), f32), wt(24, 24, 3, 3)]
        cg = check(f, inputs, covers=["conv2d_nchwc", "max_pool2d_nchwc", "from_nchwc"], passes=True, tol=tol)
        ops = cg.report.zenith_ops
        assert "max_pool2d" not in ops and "to_nchwc" not in ops and "conv2d" not in ops, ops


def test_max_pool_over_int8_codes():
    """max_pool2d_codes (chain_int8's pool between int8 convs after a ReLU: codes u8 [N, H,
    W, C]) against torch's max_pool2d over the values the codes stand for: each window's max
    code, the mark -128 (a NaN's or infinity's) where a tap holds it; channel counts on
    both sides of a 32-code vector, padding, stride, dilation, ceil mode. Floats and
    blocked tensors are refused."""
    COVERED.add("max_pool2d_codes")
    torch.manual_seed(0)
    for (n, h, w, c), (k, st, pad, dil, ceil) in [((1, 9, 7, 64), (3, 2, 1, 1, False)),
                                                  ((2, 6, 11, 37), (2, 2, 0, 1, True)),
                                                  ((1, 5, 5, 3), (3, 1, 1, 1, False)),
                                                  ((1, 10, 9, 40), (3, 1, 1, 2, False))]:
        codes = torch.randint(0, 128, (n, h, w, c), dtype=torch.int8)
        codes.view(-1)[torch.randint(0, codes.numel(), (4,))] = -128
        g = _C.Graph()
        xv = g.add_input("x", "u8", [n, h, w, c])
        (y,) = g.add_node("max_pool2d_codes", [xv], {"kernel": [k, k], "stride": [st, st], "padding": [pad, pad],
                                                     "dilation": [dil, dil], "ceil_mode": int(ceil)})
        g.set_outputs([y])
        (got,) = _C.Executable(g).run([codes.view(torch.uint8)])
        v = codes.float().masked_fill(codes == -128, float("nan")).permute(0, 3, 1, 2)
        pooled = F.max_pool2d(v, k, st, pad, dilation=dil, ceil_mode=ceil).permute(0, 2, 3, 1)
        want = pooled.nan_to_num(nan=-128.0).to(torch.int8)
        assert torch.equal(got.view(torch.int8), want), (n, h, w, c, k, st, pad, dil, ceil)
        assert (want == -128).any()  # a mark reached the output
    for dtype, shape in [("f32", [1, 5, 5, 8]), ("u8", [1, 2, 5, 5, 8])]:
        g = _C.Graph()
        xv = g.add_input("x", dtype, shape)
        with pytest.raises(RuntimeError, match="max_pool2d_codes"):
            g.add_node("max_pool2d_codes", [xv], {"kernel": [3, 3], "stride": [1, 1], "padding": [0, 0]})


def test_expand_depthwise_fused(monkeypatch):
    """MobileNet V2's expand -> depthwise pair, conv1x1 (+ bn + activation) then a
    depthwise conv (+ bn + activation), left NCHW (ZENITH_NCHWC=0: the blocked layout
    takes such blocks first where the batch is static), runs as one conv2d_pw_dw (passes on) against
    eager: wide maps whose expanded rows come in several bands per image (the window
    kept between bands, rows split between threads), strides 1 and 2, kernels 3 and 5,
    padding 0 to the window's edge, dilation 2, bias without bn, odd sizes, batches of
    1 to 3. Maps under 28 x 28 and an expanded tensor that is also returned keep the two
    convs."""
    monkeypatch.setenv("ZENITH_NCHWC", "0")
    COVERED.add("conv2d_pw_dw")
    tol = dict(rtol=1e-4, atol=1e-4)

    def f(x, w1, b1, m1, v1, g1, be1, w2, b2, m2, v2, g2, be2, s=1, p=1, d=1, bn=True, act=torch.relu):
        y = F.conv2d(x, w1, None if bn else b1)
        if bn:
            y = F.batch_norm(y, m1, v1, g1, be1, training=False, eps=1e-5)
        y = act(y)
        y = F.conv2d(y, w2, None if bn else b2, stride=s, padding=p, dilation=d, groups=w2.shape[0])
        if bn:
            y = F.batch_norm(y, m2, v2, g2, be2, training=False, eps=1e-3)
        return act(y)

    cases = [  # (N, C, E, H, W, k, kwargs)
        ((1, 3, 96, 30, 112), 3, dict(act=relu6)),
        ((1, 3, 96, 31, 112), 3, dict(s=2, act=relu6)),
        ((2, 4, 80, 29, 130), 5, dict(s=2, p=2, act=torch.relu)),
        ((3, 5, 12, 29, 31), 3, dict(bn=False, act=lambda t: t)),
        ((1, 4, 40, 33, 47), 3, dict(p=0, s=2, bn=False, act=torch.relu)),
        ((1, 4, 64, 28, 90), 3, dict(p=2, d=2, act=relu6)),
    ]
    for (n, c, e, h, w), k, kw in cases:
        inputs = [make((n, c, h, w), f32), make((e, c, 1, 1), f32), make((e,), f32)] + bn_of(e)
        inputs += [make((e, 1, k, k), f32), make((e,), f32)] + bn_of(e)
        cg = check(lambda *a: f(*a, **kw), inputs, covers=["conv2d_pw_dw"], passes=True, tol=tol)
        assert "conv2d" not in cg.report.zenith_ops, cg.report.zenith_ops
    inputs = [make((1, 3, 27, 27), f32), make((8, 3, 1, 1), f32), make((8,), f32)] + bn_of(8)
    inputs += [make((8, 1, 3, 3), f32), make((8,), f32)] + bn_of(8)
    cg = check(f, inputs, covers=["conv2d"], passes=True, tol=tol)
    assert "conv2d_pw_dw" not in cg.report.zenith_ops
    inputs[0] = make((1, 3, 28, 28), f32)
    cg = check(lambda x, w1, *r: (f(x, w1, *r), F.conv2d(x, w1)), inputs, covers=["conv2d"], passes=True, tol=tol)
    assert "conv2d_pw_dw" not in cg.report.zenith_ops


def test_inverted_residual_fused(monkeypatch):
    """MobileNet V2's whole inverted residual block, expand 1x1 -> depthwise -> project
    1x1, left NCHW (ZENITH_NCHWC=0, as above), runs as one conv2d_pw_dw with `project`
    (passes on) against eager, and so does
    a block without the expand (its first: depthwise -> project, expand=0). Each conv
    with bn, a bias or neither, chosen per conv (so a mix-up of the three convs' inputs
    fails); the projection without or with an activation, and with the block's residual
    add when shapes allow; strides 1 and 2, several bands per image and rows split
    between threads, odd channel counts (projections of 1, 3, 5 and 17 channels: the
    GEMM's skinny and tail paths, the skinny one also with a residual), batches of 1 to
    3. A projection whose input is also returned, or that is not 1x1 / stride 1, keeps
    its own conv."""
    monkeypatch.setenv("ZENITH_NCHWC", "0")
    tol = dict(rtol=1e-4, atol=1e-4)


    def block(x, w1, b1, m1, v1, g1, be1, w2, b2, m2, v2, g2, be2, w3, b3, m3, v3, g3, be3, s=1,
              norms=("bn", "bn", "bn"), expand=True, residual=False, act3=None, also=False):
        # norms[i]: "bn" (the conv without bias, then batch-norm), "bias", or "none".
        def conv(inp, w, b, kind, **kw):
            return F.conv2d(inp, w, b if kind == "bias" else None, **kw)

        def norm(y, m, v, g, be, kind, eps):
            return F.batch_norm(y, m, v, g, be, training=False, eps=eps) if kind == "bn" else y

        y = relu6(norm(conv(x, w1, b1, norms[0]), m1, v1, g1, be1, norms[0], 1e-5)) if expand else x
        d = conv(y, w2, b2, norms[1], stride=s, padding=1, groups=w2.shape[0])
        d = relu6(norm(d, m2, v2, g2, be2, norms[1], 1e-3))
        z = norm(conv(d, w3, b3, norms[2]), m3, v3, g3, be3, norms[2], 1e-5)
        if residual:
            z = z + x
        if act3 is not None:
            z = act3(z)
        return (z, d) if also else z

    cases = [  # (N, C, E, P, H, W, kwargs)
        ((1, 16, 96, 16, 30, 112), dict(residual=True)),
        ((2, 5, 40, 17, 31, 57), dict(s=2, norms=("bias", "bn", "none"))),
        ((3, 6, 36, 6, 29, 33), dict(residual=True, act3=torch.relu, norms=("bias", "bias", "bias"))),
        ((1, 4, 24, 5, 28, 28), dict(act3=relu6, norms=("none", "bias", "bn"))),
        ((2, 3, 12, 1, 33, 29), dict(s=2, norms=("bn", "none", "bias"))),
        ((2, 3, 20, 3, 28, 30), dict(residual=True, norms=("bn", "bias", "bn"))),  # skinny GEMM + residual
        ((1, 32, 32, 16, 112, 112), dict(expand=False)),  # MobileNet V2's first block
        ((3, 8, 8, 8, 29, 31), dict(expand=False, residual=True, norms=("bn", "bias", "bn"), act3=torch.relu)),
        ((2, 7, 7, 3, 30, 33), dict(expand=False, s=2, norms=("bn", "none", "bias"))),
    ]
    for (n, c, e, p, h, w), kw in cases:
        expand = kw.get("expand", True)
        inputs = [make((n, c, h, w), f32), make((e, c, 1, 1), f32), make((e,), f32)] + bn_of(e)
        inputs += [make((e, 1, 3, 3), f32), make((e,), f32)] + bn_of(e)
        inputs += [make((p, e, 1, 1), f32), make((p,), f32)] + bn_of(p)
        cg = check(lambda *a: block(*a, **kw), inputs, covers=["conv2d_pw_dw"], passes=True, tol=tol)
        assert "conv2d" not in cg.report.zenith_ops, (kw, cg.report.zenith_ops)
        assert cg.report.passes["fuse_conv_pw_dw"] == (2 if expand else 1), cg.report.passes
    # The depthwise output also returned: the projection stays a conv2d of its own.
    cg = check(lambda *a: block(*a, expand=False, also=True), inputs, covers=["conv2d"], passes=True, tol=tol)
    assert cg.report.passes["fuse_conv_pw_dw"] == 0 and "conv2d_pw_dw" not in cg.report.zenith_ops


def test_inverted_residual_blocked_fused():
    """The same blocks where the blocked layout takes them (a static batch, 16 channels
    and up): expand 1x1 -> depthwise -> project 1x1 run as one blocked conv2d_pw_dw
    (conv2d_pw_dw_nchwc) between the layout's conversions, against eager: channel counts
    that are not whole blocks (in, expanded and out), strides 1 and 2, a 5x5 depthwise
    conv, the residual, bn / bias / neither per conv, maps wide enough for several bands
    per image, batches 1 to 3; MobileNet V2's first block (no expand); and a depthwise
    output read by two 1x1 convs (expand + depthwise fused, no projection)."""
    COVERED.add("conv2d_pw_dw")
    tol = dict(rtol=1e-4, atol=1e-4)

    def wt(*shape):  # fan-in scaled, so values stay near 1 through the block
        return make(shape, f32) / (shape[1] * shape[2] * shape[3]) ** 0.5

    def block(x, w1, b1, m1, v1, g1, be1, w2, b2, m2, v2, g2, be2, w3, b3, m3, v3, g3, be3, w0=None, s=1, k=3,
              norms=("bn", "bn", "bn"), expand=True, residual=False):
        def conv(inp, w, b, kind, **kw):
            return F.conv2d(inp, w, b if kind == "bias" else None, **kw)

        def norm(y, m, v, g, be, kind):
            return F.batch_norm(y, m, v, g, be, training=False, eps=1e-5) if kind == "bn" else y

        if w0 is not None:  # a stem first (its output blocked, as MobileNet V2's)
            x = relu6(F.conv2d(x, w0, padding=1))
        y = relu6(norm(conv(x, w1, b1, norms[0]), m1, v1, g1, be1, norms[0])) if expand else x
        d = conv(y, w2, b2, norms[1], stride=s, padding=k // 2, groups=w2.shape[0])
        d = F.hardswish(norm(d, m2, v2, g2, be2, norms[1]))
        z = norm(conv(d, w3, b3, norms[2]), m3, v3, g3, be3, norms[2])
        return z + x if residual else z

    cases = [  # (N, C, E, P, H, W, kwargs)
        ((1, 16, 96, 24, 30, 112), dict(s=2)),
        ((2, 24, 144, 24, 28, 56), dict(residual=True, norms=("bias", "bn", "none"))),
        ((3, 20, 44, 20, 29, 31), dict(residual=True, norms=("none", "bias", "bias"))),
        ((1, 17, 40, 5, 33, 29), dict(s=2, k=5, norms=("bn", "none", "bias"))),
        # MobileNet V2's first block: a stem, then no expand (the stem's conv2d_nchwc stays)
        ((1, 32, 32, 16, 56, 56), dict(expand=False)),
        ((2, 24, 24, 24, 28, 30), dict(expand=False, residual=True, norms=("bias", "bn", "bn"))),
    ]
    for (n, c, e, p, h, w), kw in cases:
        expand = kw.get("expand", True)
        k = kw.get("k", 3)
        inputs = [make((n, c if expand else 3, h, w), f32), wt(e, c, 1, 1), make((e,), f32)] + bn_of(e)
        inputs += [wt(e, 1, k, k), make((e,), f32)] + bn_of(e)
        inputs += [wt(p, e, 1, 1), make((p,), f32)] + bn_of(p)
        if not expand:
            inputs.append(wt(c, 3, 3, 3))
        cg = check(lambda *a: block(*a, **kw), inputs, covers=["conv2d_pw_dw"], passes=True, tol=tol)
        ops = cg.report.zenith_ops
        assert "conv2d" not in ops and ops.get("conv2d_nchwc", 0) == (0 if expand else 1), (kw, ops)
        assert "from_nchwc" in ops, ops  # blocked: the output converted back
        assert cg.report.passes["fuse_conv_pw_dw"] == (2 if expand else 1), cg.report.passes

    # The depthwise output read by two 1x1 convs: expand + depthwise fuse, blocked, and
    # both 1x1 convs stay blocked convs of their own.
    def two(x, w1, w2, wa, wb):
        d = relu6(F.conv2d(relu6(F.conv2d(x, w1)), w2, padding=1, groups=w2.shape[0]))
        return F.conv2d(d, wa) + F.conv2d(d, wb)

    inputs = [make((2, 16, 29, 40), f32), wt(40, 16, 1, 1), wt(40, 1, 3, 3), wt(24, 40, 1, 1), wt(24, 40, 1, 1)]
    cg = check(two, inputs, covers=["conv2d_pw_dw", "conv2d_nchwc"], passes=True, tol=tol)
    assert cg.report.passes["fuse_conv_pw_dw"] == 1 and "conv2d" not in cg.report.zenith_ops, cg.report.zenith_ops


def test_residual_layer_norm():
    """Post-norm residual: LayerNorm(x + y) runs as one layer_norm reading both (passes
    on; the add is gone); a sum that is also returned keeps its add. Against eager."""
    x, y, w, b = make((5, 3, 37), f32), make((5, 3, 37), f32), make((37,), f32), make((37,), f32)
    cg = check(lambda x, y, w, b: F.layer_norm(x + y, (37,), w, b), [x, y, w, b], covers=["layer_norm"], passes=True)
    assert "add" not in cg.report.zenith_ops
    cg = check(lambda x, y, w, b: (F.layer_norm(x + y, (37,), w, b), x + y), [x, y, w, b], covers=["add"], passes=True)


def test_fused_elementwise_chains():
    """With the pass pipeline on, chains of elementwise ops become one `fused` kernel:
    GPT-2's GELU written out (a scalar exponent and constants), a broadcast bias and a
    per-row scale, a tensor exponent, NaN and infinities; against eager."""
    COVERED.add("fused")
    x, y = make((7, 130), f32), make((7, 130), f32)
    x[0, 0], y[1, 1], x[2, 2] = float("nan"), float("inf"), float("-inf")
    b, s = make((130,), f32), make((7, 1), f32)

    def gelu_new(x, b):
        h = x + b
        return 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * torch.pow(h, 3.0))))

    check(gelu_new, [x, b], covers=["fused"], passes=True)
    check(lambda x, y, s: torch.sigmoid(x * s) * y - torch.exp(-torch.abs(y)) / (1 + torch.relu(x)), [x, y, s],
          covers=["fused"], passes=True)
    check(lambda x, y: torch.maximum(torch.pow(torch.abs(x) + 1, y), torch.sqrt(torch.abs(y))) * F.silu(x), [x, y],
          covers=["fused"], passes=True)


# ------------------------------------------------------------------ found by PyTorch's OpInfo samples
# (tests/python/opinfo): each was a wrong answer or a crash.
def test_all_any_take_each_elements_truth():
    """all/any cast to int32 before reduce_min/max, so a float in (-1, 1) that is not 0
    counted as false; over no elements they hit max/min's empty-input error."""
    for dtype in [f32, f16, bf16]:
        x = torch.tensor([0.5, -0.25, 2.0], dtype=dtype)
        check(torch.all, [x])
        check(torch.any, [torch.tensor([0.0, 0.25, 0.0], dtype=dtype)])
        check(lambda t: t.all(-1), [make((3, 5), dtype, low=-0.9, high=0.9)])
        check(lambda t: t.any(0, keepdim=True), [torch.tensor([[0.0, 0.5], [0.0, 0.0]], dtype=dtype)])
    check(torch.all, [torch.tensor([float("nan"), 1.0])])  # NaN is true
    for dtype in [i64, i32, b8]:
        check(lambda t: t.all(1), [make((4, 3), dtype)])
        check(lambda t: t.any(-1), [make((4, 3), dtype)])
    check(torch.all, [torch.empty(0)])  # True
    check(torch.any, [torch.empty(0)])  # False
    check(lambda t: t.all(1), [make((2, 0), f32)])
    check(lambda t: t.any(0), [make((0, 3), i64)])


def test_reductions_over_a_0d_tensor():
    """dim 0 (or -1) of a 0-d tensor, which torch accepts as a dim of size 1: inference
    and the kernel marked mask[0] of an empty mask (all/any with keepdim=True crashed)."""
    for dtype in [f32, i64, b8]:
        x = make((), dtype)
        check(lambda t: torch.all(t, 0, keepdim=True), [x])
        check(lambda t: torch.any(t, -1), [x])
        check(lambda t: torch.amax(t, 0, keepdim=True), [x])
        check(lambda t: torch.max(t, 0), [x])
        check(lambda t: torch.max(t, -1, keepdim=True), [x])
        check(lambda t: t.sum(0, keepdim=True), [x])
    check(lambda t: t.mean(-1), [make((), f32)])
    check(lambda t: t.sum(), [torch.tensor(True)])  # counts it: int64 1 (1 byte was copied into 8)


def test_index_select_and_gather_on_a_0d_tensor():
    """index_select of a 0-d tensor threw std::length_error (vector::_M_range_insert)
    out of shape inference; gather of one skipped its index check."""
    for dtype in [f32, i64, b8]:
        x = make((), dtype)
        check(lambda t, i: t.index_select(0, i), [x, torch.tensor([0])], covers=["index_select"])
        check(lambda t, i: t.index_select(-1, i), [x, torch.tensor(0)], covers=["index_select"])
        check(lambda t, i: t.gather(0, i), [x, torch.tensor(0)], covers=["gather"])
    cg = compile_fn(lambda t, i: t.gather(0, i), [torch.tensor(3.0), torch.tensor(0)])
    with pytest.raises(RuntimeError, match="out of bounds"):
        cg([torch.tensor(3.0), torch.tensor(1)])


def test_max_min_of_infinities():
    """reduce_max started from the lowest finite float, so a row of -inf gave -3.4e38
    (masked amax/amin/norm with a fully masked row)."""
    for dtype in FLOATS:
        x = torch.tensor([[float("-inf"), float("-inf")], [1.0, float("-inf")]], dtype=dtype)
        check(lambda t: t.amax(-1), [x], covers=["reduce_max"])
        check(lambda t: torch.max(t, 1), [x], covers=["reduce_max"])
        check(lambda t: t.amin(0), [-x], covers=["reduce_min"])
        check(lambda t: t.amax(), [torch.full((3,), float("-inf"), dtype=dtype)], covers=["reduce_max"])


def test_max_dim_of_bool():
    """torch.max(bool, dim) gives indices too: argmax had no bool kernel."""
    check(lambda t: torch.max(t, 1), [make((3, 4), b8)], covers=["reduce_max", "argmax"])
    check(lambda t: torch.max(t, 0, keepdim=True), [make((5, 2), b8)], covers=["reduce_max", "argmax"])


def test_integer_gemm_conv_pool_fall_back():
    """Zenith's GEMM, convolution and pooling kernels read floats: integer tensors were
    read as floats (garbage), and integer avg_pool divides as integers in torch."""
    a, b, c = make((3, 4), i64), make((4, 5), i64), make((5,), i64)
    x, w = make((1, 2, 6, 6), i64), make((3, 2, 3, 3), i64)
    for fn, inputs in [(torch.mm, [a, b]), (torch.addmm, [c, a, b]), (torch.mm, [a.int(), b.int()]),
                       (lambda x, w: F.conv2d(x, w), [x, w]), (lambda t: F.max_pool2d(t, 2), [x]),
                       (lambda t: F.max_pool2d(t, 3, 2, 1), [x.int()]), (lambda t: F.avg_pool2d(t, 2), [x])]:
        cg = check(fn, inputs, native=False)
        assert cg.report.fallback_ops and all("integer" in e["reason"] for e in cg.report.fallback_ops.values()), \
            cg.report.fallback_ops


def test_conv_stride_from_a_one_element_list():
    """F.conv2d(..., stride=2, padding="valid") reaches aten.convolution with stride [2]:
    the kernel read stride[1] past the list (a 757 TB allocation)."""
    x, w, bias = make((1, 4, 5, 5), f32), make((1, 4, 2, 3), f32), make((1,), f32)
    check(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding="valid"), [x, w, bias], covers=["conv2d"])
    check(lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding="valid", dilation=2), [x, w, bias],
          covers=["conv2d"])


def test_inference_rejects_malformed_nodes():
    """Shape inference checks ranks, dims and attribute lengths and raises a Zenith error
    (RuntimeError) for any node the verifier sees; kernels never get one it accepted."""
    def node(op, inputs, attrs):
        g = _C.Graph()
        vals = [g.add_input(f"x{i}", dt, shape) for i, (dt, shape) in enumerate(inputs)]
        g.add_node(op, vals, attrs)

    bad = [
        ("slice", [("f32", [])], {"dim": 0, "start": [0], "end": [1], "step": 1}),
        ("slice", [("f32", [4])], {"dim": 0, "start": [], "end": [1], "step": 1}),
        ("cat", [("f32", []), ("f32", [])], {"dim": 0}),
        ("cat", [("f32", [2, 3]), ("f32", [2, 4])], {"dim": 0}),
        ("reduce_sum", [("f32", [2, 3])], {"dims": [1, -1], "keepdim": 0}),
        ("index_select", [("f32", []), ("i64", [2])], {"dim": 0}),
        ("gather", [("f32", [2, 3]), ("i64", [2, 5])], {"dim": 0}),
        ("gather", [("f32", [2, 3]), ("f32", [2, 3])], {"dim": 0}),
        ("cast", [("f32", [2])], {"dtype": 9}),
        ("full", [], {"shape": [2, -1], "value": 0.0, "dtype": 0}),
        ("arange", [], {"start": 0.0, "step": 1.0, "size": [-3], "dtype": 0}),
        ("pad", [("f32", [2, 3])], {"pad": [-2, -2], "value": 0.0}),
        ("conv2d", [("f32", [1, 2, 5, 5]), ("f32", [3, 2, 3, 3]), ("f32", [3])],
         {"stride": [2, 2, 2], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "has_bias": 1}),
        # attributes the op table does not declare, or of the wrong kind
        ("conv2d", [("f32", [1, 2, 5, 5]), ("f32", [3, 2, 3, 3]), ("f32", [3])],
         {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "has_bias": 1, "bogus": 1}),
        ("conv2d", [("f32", [1, 2, 5, 5]), ("f32", [3, 2, 3, 3]), ("f32", [3])],
         {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "has_bias": 1, "activation": 42}),
        ("conv2d", [("f32", [1, 2, 5, 5]), ("f32", [3, 2, 3, 3]), ("f32", [3])],
         {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1.5, "has_bias": 1}),
        ("relu", [("f32", [2])], {"dim": 0}),
        ("conv2d", [("f32", [1, 2, 5, 5]), ("f32", [3, 2, 3, 3]), ("f32", [3])],
         {"stride": [0, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "has_bias": 1}),
        ("conv2d", [("f32", [1, 2, 2, 2]), ("f32", [3, 2, 3, 3]), ("f32", [3])],
         {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "has_bias": 1}),
        ("conv2d", [("f32", [1, 2, 5, 5]), ("f32", [3, 2, 3, 3]), ("f32", [4])],
         {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "has_bias": 1}),
        ("conv2d", [("i64", [1, 2, 5, 5]), ("i64", [3, 2, 3, 3]), ("i64", [3])],
         {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "has_bias": 1}),
        ("max_pool2d", [("f32", [1, 2, 5, 5])], {"kernel": [3, 3, 3], "stride": [1, 1], "padding": [0, 0]}),
        ("max_pool2d", [("f32", [1, 2, 5, 5])], {"kernel": [3, 3], "stride": [1, 1], "padding": [2, 2]}),
        ("max_pool2d", [("i64", [1, 2, 5, 5])], {"kernel": [3, 3], "stride": [1, 1], "padding": [0, 0]}),
        # the blocked pool: an NCHW input, a block other than 8 or 16, padding past half the window
        ("max_pool2d_nchwc", [("f32", [1, 2, 5, 5])], {"kernel": [3, 3], "stride": [1, 1], "padding": [0, 0]}),
        ("max_pool2d_nchwc", [("f32", [1, 2, 5, 5, 4])], {"kernel": [3, 3], "stride": [1, 1], "padding": [0, 0]}),
        ("max_pool2d_nchwc", [("f32", [1, 2, 5, 5, 8])], {"kernel": [3, 3], "stride": [1, 1], "padding": [2, 2]}),
        ("avg_pool2d", [("f32", [1, 2, 5, 5])], {"kernel": [2, 2], "stride": [-1, 1], "padding": [0, 0]}),
        ("layer_norm", [("f32", [3, 8]), ("f32", [4]), ("f32", [8])], {"normalized_ndim": 1, "eps": 1e-5}),
        ("batch_norm", [("f32", [2, 3, 4]), ("f32", [3]), ("f32", [3]), ("f32", [2]), ("f32", [3])], {"eps": 1e-5}),
        ("addmm", [("f32", [5]), ("i64", [3, 4]), ("i64", [4, 5])], {}),
        ("addmm", [("f16", [5]), ("f32", [3, 4]), ("f32", [4, 5])], {}),
        ("sdpa", [("f32", [1, 2, 3, 8]), ("f32", [1, 2, 4, 6]), ("f32", [1, 2, 4, 8]), ("f32", [1])],
         {"is_causal": 0, "has_mask": 0}),
        ("sdpa", [("f32", [1, 2, 3, 8]), ("f32", [1, 2, 4, 8]), ("f32", [1, 2, 5, 8]), ("f32", [1])],
         {"is_causal": 0, "has_mask": 0}),
        ("sdpa", [("f32", [1, 2, 3, 8]), ("f32", [1, 2, 4, 8]), ("f32", [1, 2, 4, 8]), ("b8", [3, 5])],
         {"is_causal": 0, "has_mask": 1}),
    ]
    for op, inputs, attrs in bad:
        with pytest.raises(RuntimeError):
            node(op, inputs, attrs)
            raise AssertionError(f"{op} {inputs} {attrs} was accepted")


def test_sibling_linears_and_the_transposed_hand_off():
    """With the passes: three linears reading one x (Q, K, V) become one addmm_parts
    (fuse_addmm_siblings), and a linear -> GELU -> linear pair hands its hidden values
    over transposed (gemm_handoff_transposed: trans_c, then trans_a); both against eager.
    At 9 rows both run; at 3 (the skinny kernels) neither does."""
    COVERED.add("addmm_parts")
    tol = dict(rtol=1e-4, atol=1e-4)

    def qkv(x, wq, bq, wk, bk, wv, bv):
        return F.linear(x, wq, bq), F.linear(x, wk, bk), F.linear(x, wv, bv)

    def ffn(x, w1, b1, w2, b2):
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)

    for rows, fused in [(9, True), (3, False)]:
        x = torch.randn(rows, 16)
        cg = check(qkv, [x, torch.randn(24, 16), torch.randn(24), torch.randn(13, 16), torch.randn(13),
                         torch.randn(40, 16), torch.randn(40)], covers=["addmm_parts"] if fused else [], tol=tol,
                   passes=True)
        assert ("addmm_parts" in cg.report.zenith_ops) == fused
        cg = check(ffn, [x, torch.randn(50, 16), torch.randn(50), torch.randn(7, 50), torch.randn(7)], tol=tol,
                   passes=True)
        text = "".join(e.graph_text for e in cg.report.executables)
        assert ("trans_c=[1]" in text and "trans_a=[1]" in text) == fused, text


def test_quantized_ops_in_a_graph():
    """qmatmul and qembedding (u8 weights, the format printed by name) run in a compiled
    graph as their eager bindings do; the kernels and formats themselves are tested in
    test_quant_kernels.py. u8 is storage: arithmetic on it is refused."""
    COVERED.update(["qmatmul", "qembedding"])
    code = list(_C.quant_formats()).index  # format codes in the core's order
    torch.manual_seed(0)
    w = torch.randint(0, 256, (6, 144), dtype=torch.uint8)  # q4_k: K = 256
    w[:, 0:4] = torch.tensor([0.01, 0.002], dtype=torch.float16).view(torch.uint8)
    t = torch.randint(0, 256, (10, 8 * 34), dtype=torch.uint8)  # q8_0: K = 256
    t.view(10, 8, 34)[:, :, 0:2] = torch.tensor([0.02], dtype=torch.float16).view(torch.uint8)
    x, b, ids = torch.randn(3, 256), torch.randn(6), torch.tensor([9, 0, 4, 4])
    g = _C.Graph()
    xv, wv, bv = g.add_input("x", "f32", [3, 256]), g.add_input("w", "u8", [6, 144]), g.add_input("b", "f32", [6])
    tv, iv = g.add_input("t", "u8", [10, 272]), g.add_input("ids", "i64", [4])
    (y,) = g.add_node("qmatmul", [xv, wv, bv], {"format": code("q4_k")})
    (e,) = g.add_node("qembedding", [tv, iv], {"format": code("q8_0")})
    g.set_outputs([y, e])
    assert "{format=q4_k}" in str(g) and "{format=q8_0}" in str(g)
    out = _C.Executable(g).run([x, w, b, t, ids])
    assert torch.equal(out[0], _C.qmatmul(x, w, "q4_k", b))
    assert torch.equal(out[1], _C.qembedding(t, ids, "q8_0"))
    with pytest.raises(RuntimeError, match="u8 is quantized weight storage"):
        g.add_node("add", [wv, wv], {})


def test_index_put_rows():
    """index_put with one index on dim 0, set and accumulated: duplicate and negative
    indices (applied in index order), values broadcast to the rows, int64 and a 3-d
    tensor; an embedding's gradient (embedding_dense_backward's decomposition: masked,
    clamped indices, padding_idx) runs through it too. Out-of-range indices are an error."""
    COVERED.add("index_put")
    x, idx = make((10, 7), f32), torch.tensor([1, 3, 1, -1, 9, 3, 3])
    v = make((7, 7), f32)
    for acc in (True, False):
        check(lambda t, i, u: torch.index_put(t, (i,), u, accumulate=acc), [x, idx, v], covers=["index_put"])
    check(lambda t, i, u: torch.index_put(t, (i,), u, accumulate=True), [x, idx, make((7,), f32)],
          covers=["index_put"])  # a row broadcast to every indexed row
    check(lambda t, i, u: t.index_put((i,), u, accumulate=True), [make((6, 2, 3), i64), torch.tensor([[0, 5], [5, 2]]),
          make((2, 2, 2, 3), i64)], covers=["index_put"])
    check(lambda t, i, u: torch.index_put(t, (i,), u), [make((5, 4), bf16), torch.tensor([4, 0], dtype=i32),
          make((2, 4), bf16)], covers=["index_put"])  # setting moves any dtype's bytes
    # more rows than one thread's chunk: columns split across threads, sums in index order
    big_idx = torch.randint(0, 40, (3000,))
    check(lambda t, i, u: torch.index_put(t, (i,), u, accumulate=True), [make((40, 96), f32), big_idx,
          make((3000, 96), f32)], covers=["index_put"], tol=dict(rtol=1e-5, atol=1e-4))
    ids = torch.tensor([[0, 4, 4, 2], [3, 0, 1, 4]])
    cg = check(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 6, 0, False), [make((2, 4, 5), f32), ids],
               covers=["index_put"], passes=True)
    assert "full" not in cg.report.zenith_ops  # its zeros written by index_put itself (zeros_rows)
    # zeros read elsewhere too: index_put copies them rather than owning them
    check(lambda i, u: (lambda z: (torch.index_put(z, (i,), u, accumulate=True), z + 1))(torch.zeros(5, 3)),
          [torch.tensor([4, 4, 0]), make((3, 3), f32)], covers=["index_put"], passes=True)
    with pytest.raises(Exception, match="index 10 is out of bounds"):
        compile_fn(lambda t, i, u: torch.index_put(t, (i,), u), [x, torch.tensor([10]), make((1, 7), f32)])(
            [x, torch.tensor([10]), make((1, 7), f32)])


def test_layer_norm_training_statistics():
    """native_layer_norm's mean and 1 / std outputs (what a training graph saves for the
    backward) computed natively, against eager's, over one and two normalized dims."""
    x = make((3, 5, 8), f32)
    w, b = make((8,), f32), make((8,), f32)
    check(lambda t, w, b: torch.ops.aten.native_layer_norm(t, [8], w, b, 1e-5), [x, w, b], covers=["layer_norm"])
    check(lambda t: torch.ops.aten.native_layer_norm(t, [5, 8], None, None, 1e-3), [x], covers=["layer_norm"])


FLIP, COLS, WGRAD = ["flip_filters", "conv2d"], ["conv_transpose2d"], ["conv2d_weight_grad"]
CONV_BACKWARD_CASES = [  # x, w, stride, padding, dilation, groups, transposed, output_padding, the ops it runs as
    ((2, 6, 11, 10), (8, 6, 3, 3), 1, 1, 1, 1, False, 0, FLIP + WGRAD),  # 110 input pixels
    ((2, 6, 7, 9), (8, 6, 3, 3), 1, 1, 1, 1, False, 0, COLS + WGRAD),  # 63: the columns
    # 64 channels, where conv2d would run the flipped conv by Winograd: with 128+ tiles
    # (filters transformed for the call); with fewer, the columns, however many pixels
    ((8, 64, 7, 7), (64, 64, 3, 3), 1, 1, 1, 1, False, 0, FLIP + WGRAD),
    ((2, 64, 7, 7), (64, 64, 3, 3), 1, 1, 1, 1, False, 0, COLS + WGRAD),
    ((1, 64, 12, 12), (64, 64, 3, 3), 1, 1, 1, 1, False, 0, COLS + WGRAD),
    ((3, 6, 11, 10), (8, 6, 3, 3), 2, 1, 1, 1, False, 0, COLS + WGRAD),  # the last input row and column unread
    ((2, 6, 13, 12), (6, 2, 3, 3), 3, 0, 1, 3, False, 0, COLS + WGRAD),
    ((2, 6, 15, 13), (6, 3, 3, 3), 2, 2, 2, 2, False, 0, COLS + WGRAD),  # stride and dilation together
    ((2, 6, 12, 12), (6, 1, 3, 3), 2, 1, 1, 6, False, 0, COLS + WGRAD),  # depthwise
    ((2, 6, 12, 12), (6, 1, 3, 3), 1, 2, 2, 6, False, 0, FLIP + WGRAD),  # depthwise, dilated
    ((2, 20, 7, 7), (20, 1, 3, 3), 1, 1, 1, 20, False, 0, FLIP + WGRAD),  # depthwise on 49 pixels: flipped too
    ((2, 6, 12, 12), (4, 6, 1, 1), 1, 0, 1, 1, False, 0, FLIP + WGRAD),
    ((2, 6, 12, 12), (4, 6, 5, 5), 1, 2, 1, 1, False, 0, FLIP + WGRAD),  # 25 taps a filter
    ((2, 3, 50, 48), (4, 3, 3, 3), 2, 1, 1, 1, False, 0, COLS + WGRAD),  # 600 output pixels: a GEMM per image
    ((2, 6, 13), (4, 6, 5), 2, 2, 1, 1, False, 0, COLS + WGRAD),  # conv1d
    ((2, 6, 5, 4), (6, 4, 3, 3), 2, 1, 1, 1, True, 1, ["conv2d"] + WGRAD),  # ConvTranspose2d's backward
    ((2, 6, 10, 10), (6, 2, 3, 3), 1, 1, 1, 3, True, 0, ["conv2d"] + WGRAD),
]


@pytest.mark.parametrize("case", CONV_BACKWARD_CASES, ids=lambda c: f"x{c[0]}-w{c[1]}-s{c[2]}-d{c[4]}-g{c[5]}-t{int(c[6])}")
def test_convolution_backward(case):
    """aten.convolution_backward (the input's, the filters' and the bias's gradients, all
    three and each alone) against eager's: conv_transpose2d or flip_filters + conv2d for
    the input, conv2d_weight_grad for the filters, a sum for the bias."""
    COVERED.update(["conv_transpose2d", "conv2d_weight_grad", "flip_filters"])
    xs, ws, stride, pad, dil, groups, transposed, out_pad, runs_as = case
    d = len(xs) - 2
    x, w = make(xs, f32), make(ws, f32)
    if transposed:
        fwd = (F.conv_transpose1d if d == 1 else F.conv_transpose2d)(x, w, None, stride, pad, out_pad, groups, dil)
    else:
        fwd = (F.conv1d if d == 1 else F.conv2d)(x, w, None, stride, pad, dil, groups)
    gy = make(tuple(fwd.shape), f32)
    bias = [fwd.shape[1]]
    for mask in ([True, True, True], [True, False, False], [False, True, False], [False, False, True]):
        def fn(g, t, k, mask=mask):
            outs = torch.ops.aten.convolution_backward(g, t, k, bias, [stride] * d, [pad] * d, [dil] * d, transposed,
                                                       [out_pad] * d, groups, mask)
            return tuple(o for o, m in zip(outs, mask) if m)
        check(fn, [gy, x, w], covers=runs_as if all(mask) else (), tol=dict(rtol=1e-4, atol=1e-4))


def test_convolution_backward_half():
    """bfloat16 gradients run through float32 (flip_filters moves the 2-byte values
    themselves), within bfloat16's tolerance of eager's."""
    x, w = make((2, 4, 12, 11), bf16), make((6, 4, 3, 3), bf16)
    for stride, runs_as in ((1, FLIP), (2, COLS)):
        gy = make(tuple(F.conv2d(x, w, stride=stride, padding=1).shape), bf16)
        check(lambda g, t, k: torch.ops.aten.convolution_backward(g, t, k, [6], [stride] * 2, [1, 1], [1, 1], False,
                                                                  [0, 0], 1, [True, True, True]),
              [gy, x, w], covers=runs_as + WGRAD, tol=dict(rtol=2e-2, atol=5e-2))


def test_conv_transpose_forward():
    """ConvTranspose1d / 2d at inference (aten.convolution with transposed=True), with and
    without bias: conv_transpose2d (strided, output_padding, groups, dilation, small maps)
    or, at stride 1 on larger maps, conv2d over flipped filters; half types through float32."""
    for x, w, kw in [((2, 8, 9, 7), (8, 6, 3, 3), dict(stride=2, padding=1, output_padding=1)),
                     ((2, 8, 9, 7), (8, 3, 3, 3), dict(stride=1, padding=1, groups=2)),
                     ((1, 8, 12, 12), (8, 3, 3, 3), dict(stride=1, padding=0, groups=2, dilation=2)),
                     ((2, 4, 5, 5), (4, 1, 2, 2), dict(stride=2, groups=4)),
                     ((2, 4, 6, 5), (4, 5, 4, 4), dict(stride=3, padding=2, output_padding=2, dilation=1))]:
        x, w, b = make(x, f32), make(w, f32), make((w[1] * kw.get("groups", 1),), f32)
        check(lambda t, k, c: F.conv_transpose2d(t, k, c, **kw), [x, w, b], tol=dict(rtol=1e-4, atol=1e-4))
        check(lambda t, k: F.conv_transpose2d(t, k, None, **kw), [x, w], tol=dict(rtol=1e-4, atol=1e-4))
    check(lambda t, k, c: F.conv_transpose1d(t, k, c, stride=2, padding=1), [make((2, 4, 13), f32),
          make((4, 5, 4), f32), make((5,), f32)], covers=["conv_transpose2d"], tol=dict(rtol=1e-4, atol=1e-4))
    check(lambda t, k: F.conv_transpose2d(t, k, stride=2), [make((1, 4, 6, 6), bf16), make((4, 3, 2, 2), bf16)],
          covers=["conv_transpose2d"])
    check(lambda t, k: F.conv_transpose2d(t, k, padding=1), [make((1, 4, 12, 12), f32), make((4, 3, 3, 3), f32)],
          covers=["flip_filters", "conv2d"], tol=dict(rtol=1e-4, atol=1e-4))


def test_max_pool_indices_and_backward():
    """max_pool2d_with_indices' values and indices (the first maximum in window order,
    ties included; the last NaN; a window of -inf keeps its first tap) and its backward
    (each gradient added at its index; overlapping windows add up), against eager:
    padding, dilation, ceil_mode, a 3-d input. An index outside its plane is an error."""
    COVERED.update(["max_pool2d_with_indices", "max_pool2d_backward"])
    aten = torch.ops.aten
    ties = torch.randint(0, 3, (2, 3, 9, 11)).float()  # many equal maxima
    nans = make((2, 3, 9, 11), f32)
    nans[0, 0, 2, 3] = nans[0, 0, 2, 5] = nans[1, 2, 7, 7] = float("nan")
    infs = torch.full((1, 2, 6, 6), -float("inf"))
    for x in (ties, nans, infs, make((3, 10, 12), f32)):
        for k, st, pd, dl, ceil in (([3, 3], [2, 2], [1, 1], [1, 1], False), ([2, 3], [1, 2], [0, 1], [2, 1], True),
                                    ([3, 3], [3, 3], [0, 0], [1, 1], True)):
            check(lambda t: aten.max_pool2d_with_indices(t, k, st, pd, dl, ceil), [x],
                  covers=["max_pool2d_with_indices"])
            y, idx = aten.max_pool2d_with_indices(x, k, st, pd, dl, ceil)
            gy = make(tuple(y.shape), f32)
            check(lambda g, t, i: aten.max_pool2d_with_indices_backward(g, t, k, st, pd, dl, ceil, i), [gy, x, idx],
                  covers=["max_pool2d_backward"], tol=dict(rtol=1e-5, atol=1e-5))
    x = make((1, 2, 6, 6), f32)
    y, idx = aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    bad = idx.clone()
    bad[0, 1, 1, 1] = 36
    fn = lambda g, t, i: aten.max_pool2d_with_indices_backward(g, t, [2, 2], [2, 2], [0, 0], [1, 1], False, i)  # noqa: E731
    with pytest.raises(Exception, match="index 36 outside an input plane of 36"):
        compile_fn(fn, [y, x, bad])([y, x, bad])


def test_every_op_is_covered():
    """Runs after every op test above it: every op in the C++ table was exercised."""
    missing = set(_C.op_names()) - COVERED
    assert not missing, f"ops without a test: {sorted(missing)}"


def test_reductions_with_an_empty_kept_dim():
    """amax/amin/argmax/max over a non-empty dim of a tensor whose other dim is 0: eager
    returns an empty tensor (Zenith raised "max/min over an empty dimension"; found by
    the fuzzer)."""
    x = torch.randn(0, 4)
    check(lambda t: torch.amax(t, dim=1), [x], covers=["reduce_max"])
    check(lambda t: torch.amin(t, dim=-1, keepdim=True), [x], covers=["reduce_min"])
    check(lambda t: torch.argmax(t, dim=1), [x], covers=["argmax"])
    check(lambda t: torch.max(t, dim=1)[0], [torch.randn(3, 0, 5).transpose(0, 1)])


def test_layer_norm_of_rows_far_from_zero_or_huge():
    """Rows offset by 1e3 (float sums of the mean were twice eager's error) and rows
    scaled past 1.8e19 (float squares overflowed: the rows normalized to the bias;
    eager gives NaN from 1e20): against float64, Zenith is at least as close as eager
    and finite where float64 is."""
    from harness import compile_fn

    torch.manual_seed(0)
    for x in [torch.randn(4, 64) + 1e3, torch.randn(4, 64) * 1e19, torch.randn(4, 64) * 1e30]:
        fn = lambda t: F.layer_norm(t, (64,))  # noqa: E731
        got = compile_fn(fn, [x], passes=True)([x])
        got = got[0] if isinstance(got, (list, tuple)) else got
        ref = fn(x.double())
        eager_err = (fn(x).double() - ref).abs().nan_to_num(math.inf).max().item()
        zen_err = (got.double() - ref).abs().max().item()
        assert zen_err <= min(max(eager_err, 1e-6), 1e-4), (zen_err, eager_err)


def test_log_softmax_of_rows_with_large_maxima():
    """log_softmax([1e30, 1e30, 1]) is log(1/2) twice: the kernel subtracted max + log(sum)
    in one step and lost log(sum) against 1e30 (found by the fuzzer)."""
    y = torch.tensor([[1e30, 1e30, 1.0], [3e4, 3e4 + 1, -2.0], [-0.0, 1e-40, -1e30]])
    check(lambda t: torch.log_softmax(t, 1), [y], covers=["log_softmax"])
    check(lambda t: torch.log_softmax(t, 0), [y.t().contiguous()], covers=["log_softmax"])


def test_abs_and_erf_of_negative_zero():
    """abs(-0) is +0 and erf(-0) is -0: 1 / result shows the sign (both were wrong; found
    by the fuzzer through x / abs(y) and 1 / erf(ceil(-0.3)))."""
    z = torch.tensor([-0.0, 0.0, -1.5])
    check(lambda t: 1.0 / torch.abs(t), [z], covers=["abs"])
    check(lambda t: 1.0 / torch.erf(t), [z], covers=["erf"])
