"""Random quantized CNNs for differential fuzzing of Zenith's INT8 path.

A net is a chain of blocks (conv2d with random channels, kernel, stride, padding and
dilation; batch-norm, a residual add, an activation; now and then a grouped conv, which
stays float, or a max-pool) and a head (none, or the feature map as tokens through two
linear layers). `draw_qnet` draws one from a Hypothesis `data` object, so failures
replay and shrink to a `QNet(...)` literal; `run_qcase` quantizes it (int8-dynamic or
int8-static with a calibration method, every conv or the default rule, 7- or 8-bit
weights), runs it eagerly (Zenith's quantized ops layer by layer) and frozen (the
compiled graph: batch-norm folded, the blocked layout, codes between convs, fused
epilogues), and judges:

- frozen with float32 between int8 convs (ZENITH_INT8_CHAIN=0) against eager: within
  one matmul's quantization step (quant_util.assert_same_model_close's bound; a last-bit
  difference upstream may move an activation across a rounding boundary), NaN where
  eager has NaN and nowhere else;
- codes between convs with float residuals (ZENITH_INT8_CHAIN=exact): bit for bit the
  float32 chain's output (the codes are the ones the next conv would have made);
- residuals as codes (the default; reached by a skip over two convs): the output's
  direction (cosine 0.99: each residual is rounded and clipped to its reader's scale),
  NaN or inf where float32 between convs has a non-finite value and nowhere else;
- 1, 2 and 3 threads: bit for bit the same (integer sums, and the kernels split rows or
  column blocks), except where an fp32 GEMM of at most 4 rows splits K (same_threads).

The same random-init weights with batch-norm statistics drawn away from identity, so
folding them is not a no-op.
"""
from __future__ import annotations

import collections
import copy
import os
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn

import zenith
from zenith.quant import summary

QCOUNTS = collections.Counter()  # what the fuzzed nets reached (printed by the test)

ACTS = {"relu": nn.ReLU, "relu6": nn.ReLU6, "none": nn.Identity, "gelu": nn.GELU, "silu": nn.SiLU}


@dataclass
class QBlock:
    kind: str  # "conv" | "pool"
    oc: int = 0
    k: tuple = (1, 1)
    stride: int = 1
    pad: tuple = (0, 0)
    dil: int = 1
    groups: int = 1
    bn: bool = False
    res: int = 0  # 1: add the block's input; 2: add the previous conv block's input (a basic block)
    act: str = "none"


@dataclass
class QNet:
    shape: tuple  # N, C, H, W
    blocks: list
    head: str  # "none" | "tokens"
    scheme: str  # "int8-dynamic" | "int8-static"
    method: str  # calibration method (int8-static)
    everywhere: bool  # int8_everywhere
    conv_bits: int | None
    linear_bits: int
    special: str  # "" | "nan" | "inf": one input element replaced
    seed: int


def _out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def draw_qnet(data):
    from hypothesis import strategies as st

    def pick(xs):
        return data.draw(st.sampled_from(xs))

    def num(lo, hi):
        return data.draw(st.integers(lo, hi))

    n, c, h, w = pick([1, 1, 2, 3]), num(1, 40), num(3, 30), num(3, 30)
    shape = (n, c, h, w)
    blocks, last_in = [], None  # last_in: the last conv block's input (C, H, W), if it kept H, W
    for _ in range(num(1, 5)):
        if blocks and h >= 4 and w >= 4 and num(0, 9) == 0:
            blocks.append(QBlock("pool", k=(2, 2), stride=2))
            h, w = h // 2, w // 2
            last_in = None
            continue
        kh = pick([1, 1, 3, 3, 5, 7])
        kw = kh if num(0, 6) else pick([1, 3])
        # a skip over two convs: its input is read by one int8 conv as input and by the
        # next as residual, the case where codes stand in for a residual (chain_int8)
        res = pick([0, 0, 1, 2]) if last_in else pick([0, 0, 1])
        dil = 1 if res and kh != kw else pick([1, 1, 1, 2])
        stride = 1 if res else pick([1, 1, 2])
        if res or num(0, 3):
            pad = (dil * (kh - 1) // 2, dil * (kw - 1) // 2)
        else:
            pad = (num(0, kh // 2), num(0, kw // 2))
        groups = 1
        if res == 1:
            oc = c
        elif res == 2:
            oc = last_in[0]
        else:
            # now and then wide: a 3x3 filter over 200+ channels passes 512 KiB, where the
            # conv stops splitting rows across threads and splits each chunk's columns
            oc = (pick([num(1, 72), 8 * num(1, 9), 16 * num(1, 5)]) if num(0, 11) else num(200, 300))
            if c % 2 == 0 and oc % 2 == 0 and num(0, 9) == 0:
                groups = 2
        oh, ow = _out(h, kh, stride, pad[0], dil), _out(w, kw, stride, pad[1], dil)
        if oh < 1 or ow < 1 or (res and (oh, ow) != (h, w)):
            continue
        blocks.append(QBlock("conv", oc, (kh, kw), stride, pad, dil, groups, bool(num(0, 4) < 3), res,
                             pick(["relu", "relu", "relu", "none", "relu6", "gelu", "silu"])))
        last_in = (c, h, w) if (oh, ow) == (h, w) else None
        c, h, w = oc, oh, ow
    if not any(b.kind == "conv" for b in blocks):
        blocks.append(QBlock("conv", pick([1, 8, 13]), (1, 1), act="relu"))
    return QNet(shape, blocks, pick(["none", "none", "tokens"]), pick(["int8-dynamic", "int8-static"]),
                pick(["percentile", "minmax", "entropy"]), num(0, 3) > 0, pick([None, 7, 8]), pick([7, 8]),
                pick(["", "", "", "nan", "inf"]), num(0, 2**30))


class _Block(nn.Module):
    def __init__(self, c, b: QBlock):
        super().__init__()
        self.conv = nn.Conv2d(c, b.oc, b.k, b.stride, b.pad, b.dil, b.groups, bias=not b.bn)
        self.bn = nn.BatchNorm2d(b.oc) if b.bn else None
        self.act = ACTS[b.act]()
        self.res = b.res

    def forward(self, x, skip):
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        if self.res:
            y = y + (x if self.res == 1 else skip)
        return self.act(y)


class _Net(nn.Module):
    def __init__(self, net: QNet):
        super().__init__()
        layers, c = [], net.shape[1]
        for b in net.blocks:
            if b.kind == "pool":
                layers.append(nn.MaxPool2d(2))
                continue
            layers.append(_Block(c, b))
            c = b.oc
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(c, 24), nn.GELU(), nn.Linear(24, 13)) if net.head == "tokens" else None

    def forward(self, x):
        skip = None  # the last conv block's input
        for layer in self.body:
            if isinstance(layer, _Block):
                x, skip = layer(x, skip), x
            else:
                x, skip = layer(x), None
        y = x
        if self.head is not None:
            y = self.head(y.flatten(2).transpose(1, 2))
        return y


def build(net: QNet):
    torch.manual_seed(net.seed)
    m = _Net(net).eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.3, 0.3)
    return m


def _frozen(q, x, chain=None, threads=None):
    old_env, old_threads = os.environ.get("ZENITH_INT8_CHAIN"), torch.get_num_threads()
    if chain is None:
        os.environ.pop("ZENITH_INT8_CHAIN", None)
    else:
        os.environ["ZENITH_INT8_CHAIN"] = chain
    try:
        if threads:
            torch.set_num_threads(threads)
        f = zenith.freeze(q)
        y = f(x)
        return y, f.reports
    finally:
        torch.set_num_threads(old_threads)
        if old_env is None:
            os.environ.pop("ZENITH_INT8_CHAIN", None)
        else:
            os.environ["ZENITH_INT8_CHAIN"] = old_env


def same_bits(a, b):
    """Bit for bit equal, NaN where the other has NaN (payloads may differ)."""
    if a.shape != b.shape or not torch.equal(a.isnan(), b.isnan()):
        return False
    return torch.equal(a.masked_fill(a.isnan(), 0.0).view(torch.int32), b.masked_fill(b.isnan(), 0.0).view(torch.int32))


def reference_model(q):
    """q with each int8 conv computed by torch (quant.ops.reference_conv2d: fake-quantized
    activations against the de-quantized filters, in float32), the judge of the kernel
    both eager and frozen run. (An infinite input has no reference: the kernel makes each
    window that reads it NaN, the fake quantizer clamps it to 127 steps.)"""
    from zenith.quant.modules import QConv2d
    from zenith.quant.ops import reference_conv2d

    r = copy.deepcopy(q)
    for mod in r.modules():
        if isinstance(mod, QConv2d):
            mod.forward = lambda x, c=mod: reference_conv2d(x, c.weight, c.bias, c.kernel_size, c.stride, c.padding,
                                                            c.dilation, c.x_scale)
    return r


def run_qcase(net: QNet):
    """Raises AssertionError with what differs."""
    from quant_util import KERNEL_TOL, has_7bit_layers

    m = build(net)
    g = torch.Generator().manual_seed(net.seed + 1)
    x = torch.randn(*net.shape, generator=g)
    kw = dict(int8_everywhere=net.everywhere, conv_weight_bits=net.conv_bits, linear_weight_bits=net.linear_bits)
    if net.scheme == "int8-static":
        kw.update(calibration=[torch.randn(*net.shape, generator=g) for _ in range(2)], method=net.method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = zenith.quantize(copy.deepcopy(m), net.scheme, **kw)
    if net.special:
        at = int(torch.randint(0, x.numel(), (1,), generator=g))
        x.view(-1)[at] = float("nan") if net.special == "nan" else float("inf")
    s = summary(q)
    QCOUNTS["nets"] += 1
    QCOUNTS["int8_layers"] += len(s.layers)
    QCOUNTS["float_layers_kept"] += len(s.kept)
    with torch.no_grad():
        want = q(x)
        ref = reference_model(q)(x) if net.special != "inf" else None
        f32, reports = _frozen(q, x, chain="0")
        exact, _ = _frozen(q, x, chain="exact")
        codes, reports_codes = _frozen(q, x)
        by_threads = [_frozen(q, x, threads=t)[0] for t in (1, 2, 3)]
    for r in reports + reports_codes:
        assert not r.fallback_ops, f"fell back to PyTorch: {r.fallback_ops}"
    for r in reports_codes:
        for k in ("layout_nchwc", "chain_int8", "fuse_conv_residual", "fuse_conv_bn"):
            QCOUNTS[k] += r.passes.get(k, 0)
    QCOUNTS["with_" + (net.special or "finite") + "_input"] += 1
    # the convs' activations are 8-bit codes; the head's linears are the same op in eager
    # and in the reference, but a frozen graph's 7-bit ones may step on a flipped rounding
    tol = 2.5 * KERNEL_TOL if has_7bit_layers(q) else KERNEL_TOL
    close(want, ref, KERNEL_TOL, "eager (Zenith's qconv2d) vs torch's reference conv")
    close(f32, want, tol, "frozen (float32 between int8 convs) vs eager")
    assert same_bits(exact, f32), "codes between convs (float residuals) differ from float32 between them"
    # Residuals as codes: each value rounded to the step of the conv that reads it as input,
    # and clipped where that conv's static scale clips (entropy calibration clips hard), an
    # infinity read as NaN (the codes' one mark): so the direction of the output, NaN or inf
    # where float32 between convs has a non-finite value and nowhere else.
    if not same_bits(codes, exact):
        QCOUNTS["residual_codes_read"] += 1
    assert torch.equal(torch.isfinite(codes), torch.isfinite(f32)), "residual codes: non-finite at other places"
    assert torch.equal(codes.isnan() & ~f32.isinf(), f32.isnan()), "residual codes: NaN at other places"
    ok = torch.isfinite(f32)
    if ok.any() and f32[ok].abs().max() > 0:
        cos = torch.nn.functional.cosine_similarity(codes[ok].double(), f32[ok].double(), dim=0).item()
        assert cos >= 0.99, f"residual codes vs float32 between convs: cosine {cos:.5f} < 0.99"
    same_threads(by_threads)


def close(got, ref, tol, what):
    """NaN, +inf and -inf at the same places; the finite values within tol (normalized)."""
    from quant_util import normalized_error

    if ref is None:
        return
    for kind, f in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("-inf", torch.isneginf)):
        assert torch.equal(f(got), f(ref)), (
            f"{what}: {kind} at {int(f(got).sum())} places, {int(f(ref).sum())} in the reference")
    ok = torch.isfinite(ref)
    if ok.any():
        err = normalized_error(got[ok], ref[ok])
        assert err <= tol, f"{what}: normalized error {err:.3g} > {tol}"


def same_threads(outs):
    """Outputs at 1, 2 and 3 threads: the int8 sums are exact and every kernel splits its
    rows or columns, so bit for bit; except that fp32 GEMMs of at most 4 rows (a float 1x1
    conv to 4 channels or fewer) split K across threads and sum the parts in another order:
    there within 1e-5, NaN and inf at the same places."""
    for t, o in zip((2, 3), outs[1:]):
        if not same_bits(o, outs[0]):
            close(o, outs[0], 1e-5, f"{t} threads vs 1")


# ---- random quantized MLPs: the linear kernels (decode rows and prefill GEMMs, every weight format)


@dataclass
class QMlp:
    rows: tuple  # (B, T): B * T rows into every layer (1-8: the decode kernels)
    widths: list  # in, then each layer's out
    siblings: int  # a layer index whose input also feeds two more linears (concatenated): -1 none
    acts: list  # per layer
    bias: bool
    scheme: str  # "int8" | "int4" | "nf4" | "int8-dynamic" | "int8-static"
    group: int  # int4's group size
    symmetric: bool
    linear_bits: int
    special: str  # "" | "nan"
    seed: int


def draw_qmlp(data):
    from hypothesis import strategies as st

    def pick(xs):
        return data.draw(st.sampled_from(xs))

    def num(lo, hi):
        return data.draw(st.integers(lo, hi))

    rows = (pick([1, 1, 2]), pick([1, 1, 2, 3, 5, 8, 9, 16, 33, 70]))
    layers = num(1, 4)
    # K a multiple of 32 mostly (the 4-bit formats' blocks), now and then not (int4 and nf4
    # layers then stay float; int8 rows take any K)
    widths = [32 * num(1, 12) if num(0, 5) else num(1, 200) for _ in range(layers + 1)]
    return QMlp(rows, widths, pick([-1, -1, 0, layers - 1]), [pick(["none", "relu", "gelu", "silu"]) for _ in range(layers)],
                pick([True, False]), pick(["int8", "int4", "nf4", "int8-dynamic", "int8-static"]), pick([32, 64, 128]),
                pick([True, False]), pick([7, 8]), pick(["", "", "", "nan"]), num(0, 2**30))


class _Mlp(nn.Module):
    def __init__(self, net: QMlp):
        super().__init__()
        w = net.widths
        self.layers = nn.ModuleList(nn.Linear(w[i], w[i + 1], bias=net.bias) for i in range(len(w) - 1))
        self.acts = nn.ModuleList(ACTS[a]() for a in net.acts)
        s = net.siblings
        self.extra = nn.ModuleList(nn.Linear(w[s], w[s + 1], bias=net.bias) for _ in range(2)) if s >= 0 else None
        self.siblings = s

    def forward(self, x):
        for i, (lin, act) in enumerate(zip(self.layers, self.acts)):
            y = lin(x)
            if i == self.siblings:  # three linears reading one input: fuse_qmatmul_siblings' pattern
                y = y + self.extra[0](x) * self.extra[1](x)
            x = act(y)
        return x


def _act_rounding_bound(x, w, format):
    """Per output, how far rounding x to the coarsest codes any kernel here uses (7 bits on
    blocks of 256 values: every format's activation blocks are 256 values or a divisor, its
    codes 7 or 8 bits) moves x @ dequantize(w)^T but with probability 1e-9, plus float32
    summation's share. Hoeffding: each value's rounding error lies in a range of one step,
    independently of the others, so the sum's stays within sqrt(sum_k (step_k w_k)^2 ln(2 / 1e-9) / 2).
    For outputs that cancel to far below their terms, where an error relative to the largest
    output (normalized_error) says nothing about the kernel."""
    from zenith.quant.formats import dequantize

    x2 = x.reshape(-1, x.shape[-1]).float()
    k = x2.shape[1]
    blocks = torch.nn.functional.pad(x2.abs(), (0, (-k) % 256)).reshape(x2.shape[0], -1, 256).amax(-1)
    step = (blocks / 63).repeat_interleave(256, dim=1)[:, :k]
    wd = dequantize(w, format).t()
    return (step.square() @ wd.square() * 10.7).sqrt() + 1e-5 * (x2.abs() @ wd.abs()) + 1e-7


def run_qmlp(net: QMlp):
    from quant_util import ACT_7BIT, KERNEL_TOL, has_7bit_layers, normalized_error
    from zenith.quant.modules import QLinear
    from zenith.quant.ops import fake_quant_act, reference_linear

    torch.manual_seed(net.seed)
    m = _Mlp(net).eval()
    g = torch.Generator().manual_seed(net.seed + 1)
    shape = (*net.rows, net.widths[0])
    x = torch.randn(*shape, generator=g)
    kw = dict(linear_weight_bits=net.linear_bits) if net.scheme in ("int8", "int8-dynamic", "int8-static") else {}
    if net.scheme == "int4":
        kw.update(group_size=net.group, symmetric=net.symmetric)
    if net.scheme == "int8-static":
        kw.update(calibration=[torch.randn(*shape, generator=g) for _ in range(2)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = zenith.quantize(copy.deepcopy(m), net.scheme, **kw)
    if net.special:
        x.view(-1)[int(torch.randint(0, x.numel(), (1,), generator=g))] = float("nan")
    s = summary(q)
    QCOUNTS["mlps"] += 1
    QCOUNTS["linear_layers"] += len(s.layers)
    rows = net.rows[0] * net.rows[1]  # the int8 GEMM takes 8+ rows, AVX2's 4-bit GEMM 64+
    QCOUNTS["mlp_rows_" + ("1-7" if rows < 8 else "8-63" if rows < 64 else "64+")] += 1
    QCOUNTS["mlp_with_nan_input"] += net.special == "nan"
    # each quantized layer in eager against torch on its own input: the de-quantized weight,
    # and the activations as the kernel sees them where that is exact (static int8)
    seen = []
    hooks = [mod.register_forward_hook(lambda mod, a, y: seen.append((mod, a[0], y)))
             for mod in q.modules() if isinstance(mod, QLinear)]
    try:
        with torch.no_grad():
            want = q(x)
    finally:
        for h in hooks:
            h.remove()
    for mod, xin, y in seen:
        xr = fake_quant_act(xin, mod.x_scale) if mod.x_scale is not None else xin
        ref = reference_linear(xr, mod.weight, mod.bias, mod.format).reshape(y.shape)
        tol = (2.5 if ACT_7BIT and mod.format == "int8" and mod.x_scale is None else 1.0) * KERNEL_TOL
        assert torch.equal(y.isnan(), ref.isnan()), (
            f"{mod.format} layer (x_scale {mod.x_scale}): NaN at {int(y.isnan().sum())} places, "
            f"{int(ref.isnan().sum())} in torch's reference")
        ok = ~ref.isnan()
        if ok.any():
            err = normalized_error(y[ok], ref[ok])
            # A few outputs (one row into a layer of one output, say) may all cancel far below their
            # terms, and the largest of them says nothing of the kernel's error; those are held to
            # what rounding the activations could do instead.
            few = int(ok.sum()) < 16
            if err > tol and few:
                bound = _act_rounding_bound(xr, mod.weight, mod.format).reshape(y.shape)
                assert ((y - ref).abs()[ok] <= bound[ok]).all(), (
                    f"{mod.format} layer (x_scale {mod.x_scale}) vs torch's reference: {err:.3g} > {tol}, and past "
                    f"what rounding the activations could do")
                QCOUNTS["few_outputs_cancelling"] += 1
            else:
                assert err <= tol, f"{mod.format} layer (x_scale {mod.x_scale}) vs torch's reference: {err:.3g} > {tol}"
    with torch.no_grad():
        frozen, reports = _frozen(q, x)
        by_threads = [_frozen(q, x, threads=t)[0] for t in (1, 2, 3)]
    for r in reports:
        assert not r.fallback_ops, f"fell back to PyTorch: {r.fallback_ops}"
        QCOUNTS["fuse_qmatmul_siblings"] += r.passes.get("fuse_qmatmul_siblings", 0)
    assert torch.equal(frozen.isnan(), want.isnan()), "frozen: NaNs at other places than eager's"
    ok = ~want.isnan()
    if ok.any():
        # as assert_same_model_close, per layer's worth of steps
        tol = 2.5 * KERNEL_TOL if has_7bit_layers(q) else KERNEL_TOL
        err = normalized_error(frozen[ok], want[ok])
        assert err <= tol, f"frozen vs eager: normalized error {err:.3g} > {tol}"
    same_threads(by_threads)
