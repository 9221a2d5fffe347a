"""zenith.quantize: quantization of a model's layers, in place: weight-only (linear
layers, and embeddings if asked) or INT8 weights and activations (linear and conv layers;
static with calibration, or dynamic)."""
from __future__ import annotations

import fnmatch
import logging
import warnings
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import nn

from zenith import _C
from zenith.quant import calibrate as cal
from zenith.quant.formats import fp32_bytes
from zenith.quant.modules import QConv2d, QEmbedding, QLinear, Unquantizable, is_conv1d

log = logging.getLogger("zenith")

WEIGHT_ONLY = ("int8", "int4", "nf4")
ACTIVATION = ("int8-dynamic", "int8-static")  # int8 weights and int8 activations, linear and conv layers
SCHEMES = WEIGHT_ONLY + ACTIVATION
INT4_GROUPS = {32: ("q4_0", "q4_1"), 64: ("int4_g64", "uint4_g64"), 128: ("int4_g128", "uint4_g128")}


def scheme_format(scheme, group_size=None, symmetric=True):
    """The weight format a scheme and its options give (see zenith.quant.formats)."""
    if scheme not in SCHEMES:
        raise ValueError(f"zenith.quantize: unknown scheme {scheme!r}; schemes: {', '.join(map(repr, SCHEMES))}")
    if scheme == "int4":
        g = 32 if group_size is None else group_size
        if g not in INT4_GROUPS:
            raise ValueError(f"zenith.quantize: int4 group_size must be one of {', '.join(map(str, INT4_GROUPS))}, "
                             f"got {group_size!r}")
        return INT4_GROUPS[g][0 if symmetric else 1]
    if not symmetric:
        raise ValueError(f"zenith.quantize: {scheme} is symmetric only (asymmetric: scheme='int4', symmetric=False)")
    if scheme.startswith("int8"):
        if group_size is not None:
            raise ValueError(f"zenith.quantize: {scheme} has one weight scale per output channel; group_size does "
                             f"not apply")
        return "int8"
    if group_size not in (None, 64):
        raise ValueError(f"zenith.quantize: nf4 uses blocks of 64 (as bitsandbytes does), got group_size={group_size!r}")
    return "nf4"


@dataclass
class QuantLayer:
    name: str
    kind: str  # "linear" | "conv2d" | "embedding"
    format: str
    bytes: int  # of the quantized weight (shared weights: counted at their first layer only)
    fp32_bytes: int  # the same weight in fp32 (shared: counted once too)
    # how the kernel takes x: "static" (int8 on x_scale, from calibration), "dynamic" (int8
    # on scales of its own: per 32 values (int8-dynamic's on AVX2 from 8 rows per 64:
    # _C.qmatmul_act_block), or per image for convs), "dynamic per row"
    # (int8-dynamic's linear layers where this CPU's int8 GEMM takes one scale per row:
    # AVX-512 VNNI), "float" (nf4 reads x as it is), "none" (an embedding)
    activations: str = "dynamic"
    x_scale: Optional[float] = None  # static: the activations' scale
    error: Optional[float] = None  # static: |y_q - y| / |y| of this layer alone on calibration batches
    smoothed: bool = False  # static: x scaled per channel before it is quantized (quantize's smooth=)
    # int8: 7 when every code is within +-63 (zenith.quantize's conv_weight_bits / linear_weight_bits), else 8
    weight_bits: Optional[int] = None


@dataclass
class QuantSummary:
    layers: list = field(default_factory=list)  # QuantLayer
    kept: dict = field(default_factory=dict)  # layer name -> why it stayed in floating point

    @property
    def bytes_saved(self):
        return sum(layer.fp32_bytes - layer.bytes for layer in self.layers)


def summary(model) -> QuantSummary:
    """The quantized layers of a model (from zenith.quantize or zenith.load_gguf) and the
    layers zenith.quantize kept in floating point, with the reasons."""
    import torch

    s = QuantSummary(kept=dict(getattr(model, "_zenith_quant_kept", {})))
    errors = getattr(model, "_zenith_quant_errors", {})
    seen = set()
    row_scales = _C.qmatmul_row_scales()  # whether this CPU runs row_scale layers per row
    for name, m in model.named_modules():
        if isinstance(m, (QLinear, QConv2d, QEmbedding)):
            key = (m.weight.data_ptr(), m.weight.shape)
            shared = key in seen
            seen.add(key)
            kind = "linear" if isinstance(m, QLinear) else "conv2d" if isinstance(m, QConv2d) else "embedding"
            x_scale = getattr(m, "x_scale", None)
            per_row = getattr(m, "row_scale", False) and row_scales
            acts = ("static" if x_scale is not None else "none" if kind == "embedding"
                    else "float" if m.format == "nf4" else "dynamic per row" if per_row else "dynamic")
            bits = None
            if m.format == "int8" and m.weight.numel():
                bits = 7 if int(m.weight[:, 4:].view(torch.int8).abs().max()) <= 63 else 8
            s.layers.append(QuantLayer(name, kind, m.format, 0 if shared else m.nbytes,
                                       0 if shared else fp32_bytes(m.weight, m.format), acts, x_scale,
                                       errors.get(name), getattr(m, "x_smooth", None) is not None, bits))
    return s


def _excluded(name, patterns):
    parts = name.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(p, pat) for p in prefixes for pat in patterns)


def _check_options(scheme, calibration, method, percentile, max_error, smooth):
    if scheme != "int8-static":
        for name, v in (("calibration", calibration), ("max_error", max_error), ("smooth", smooth)):
            if v is not None:
                raise ValueError(f"zenith.quantize: {name} is for scheme='int8-static' (calibrated activations), "
                                 f"not {scheme!r}")
        return
    if calibration is None:
        raise ValueError("zenith.quantize('int8-static') needs calibration=: an iterable of model inputs (a tensor, "
                         "a tuple of positional arguments or a dict of keyword arguments per batch)")
    if method not in cal.METHODS:
        raise ValueError(f"zenith.quantize: unknown calibration method {method!r}; methods: "
                         f"{', '.join(map(repr, cal.METHODS))}")
    if not 0 < percentile <= 100:
        raise ValueError(f"zenith.quantize: percentile must be in (0, 100], got {percentile!r}")
    if max_error is not None and not max_error > 0:
        raise ValueError(f"zenith.quantize: max_error must be a positive relative error, got {max_error!r}")
    if smooth is not None and (isinstance(smooth, bool) or not isinstance(smooth, (int, float)) or not 0 <= smooth <= 1):
        raise ValueError(f"zenith.quantize: smooth is SmoothQuant's migration strength alpha in [0, 1], got {smooth!r}")


def _weight_columns_amax(m):
    """max |w| of each input channel of a linear layer (nn.Linear or Conv1D)."""
    w = m.weight.detach().float()
    return (w if isinstance(m, nn.Linear) else w.t()).abs().amax(0)


def _smoothing(ms, x_amax, alpha):
    """SmoothQuant's divisor per input channel for the layers `ms` reading one x: s =
    max|x|^alpha / max|w|^(1 - alpha), max|w| over all their weights' columns, so x / s
    and w * s split a channel's range between activation and weight; None if the observed
    inputs' last dimension is not the layers' input width."""
    w_amax = [_weight_columns_amax(m) for m in ms]
    if any(x_amax.numel() != w.numel() for w in w_amax):
        return None
    w_amax = torch.stack(w_amax).amax(0)
    floor = 1e-5  # a channel that is all zeros (in x or in w) keeps a finite, positive s
    s = x_amax.float().clamp(min=floor) ** alpha / w_amax.clamp(min=floor) ** (1 - alpha)
    return s.clamp(min=floor)


def _calibrate(model, layers, calibration, method, percentile, error_batches, smooth=None, smoothable=()):
    """Observes the inputs of `layers` ({name: float module}) over the calibration batches.
    Returns ({name: x_scale} for the layers the data reached, the first error_batches
    batches, kept for measuring errors, {name: SmoothQuant divisor} for the `smoothable`
    layers when smooth (alpha) is given). Smoothing reads
    the data twice (once for each channel's range, once for the smoothed activations'
    distribution) unless the method is minmax, whose smoothed maximum follows from the
    first pass."""
    kept_batches = []

    def batches(data):
        for b in data:
            if len(kept_batches) < error_batches:
                kept_batches.append(b)
            yield b

    data = calibration if smooth is None else list(calibration)
    first = {}  # a label of each smoothable layer's first input tensor (siblings read one)
    with cal.zenith_linears(model):
        observers, n = cal.observe(model, layers, batches(data), channels=smoothable if smooth is not None else (),
                                   first_inputs=first if smooth is not None else None)
    scales = {name: o.scale(method, percentile) for name, o in observers.items() if o.total > 0}
    smoothing = {}
    if smooth is not None:
        # Layers reading one and the same x (Q, K and V) share one divisor, from their
        # weights' columns together: the same multiplier of x for all, so their qmatmuls
        # quantize x once and share one int8 GEMM (fuse_qmatmul_siblings), as
        # SmoothQuant folds one s for Q, K and V into the LayerNorm before them.
        groups = {}
        for name in smoothable:  # (and one input width: a label names one tensor, but never stack two widths)
            if name in scales:
                groups.setdefault((first.get(name, name), observers[name].channel_amax.numel()), []).append(name)
        for names in groups.values():
            amax = torch.stack([observers[n].channel_amax for n in names]).amax(0)
            s = _smoothing([layers[n] for n in names], amax, smooth)
            if s is not None:
                smoothing.update({n: s for n in names})  # one tensor: the layers share their x_smooth
        if method == "minmax":
            for name, s in smoothing.items():
                scales[name] = cal.scale_of(float((observers[name].channel_amax / s).max()))
        elif smoothing:
            with cal.zenith_linears(model):
                again, _ = cal.observe(model, {name: layers[name] for name in smoothing}, iter(data),
                                       multipliers={name: 1.0 / s for name, s in smoothing.items()})
            scales.update({name: o.scale(method, percentile) for name, o in again.items() if o.total > 0})
    log.info("zenith.quantize: calibrated %d layers on %d batches (%s%s)", len(scales), n, method,
             f", {len(smoothing)} smoothed with alpha {smooth:g}" if smooth is not None else "")
    return scales, kept_batches, smoothing


def _int8_max(bits):
    """The largest int8 code of `bits`-bit weights (7 or 8)."""
    return (1 << (bits - 1)) - 1


def default_conv_weight_bits():
    """zenith.quantize's conv_weight_bits when None: 7 where this CPU's int8 kernels are
    AVX2's (its w7 conv tiles; quant_avx2.cc), else 8."""
    return 7 if _C.qmatmul_isa() == "avx2" else 8


def _int8_conv_slower(conv, isa=None):
    """Why Zenith's int8 kernels would run this conv slower than its fp32 ones, or None.
    isa: the int8 kernels' instruction set (None: this CPU's, _C.qmatmul_isa()).
    - A stem on <= 4 input channels, unless the int8 kernels are AVX-512 VNNI's and it has
      4096+ products per output pixel (in channels x kernel x out channels): fp32 runs it as
      a direct conv, and int8 pays per pixel for the quantizer, the window rows and the
      write-out. On AVX-512 VNNI (its window rows copied 32 bytes a tap row, its output
      written blocked for the blocked max pool, 2026-12-05) ResNet-50 int8-static with its
      7x7 stem (9408 products a pixel) in int8 takes 0.970x the time at batch 1 (twice) and
      0.973x at batch 8; MobileNet V2's 3x3 stem (864) 1.092x at batch 1; on AVX2's maddubs
      ResNet-50 1.008x (AMD Zen 4 family 25 model 17, the AVX2 one held to it; 2 threads,
      in-process A/Bs); AVX-VNNI's (256-bit) is not measured. Where the stem is not blocked
      (a symbolic batch, no blocked conv after it) it writes NCHW: 0.98-1.01x. (Before
      those, ResNet-50's int8 stem took 1.55x fp32's time, Intel Xeon family 6 model 167.)
    - Without VNNI (AVX2's maddubs), a 3x3 stride-1 conv over 64+ channels in and out,
      which fp32 runs by Winograd (on maps of 7 x 7 and up, which the rule does not see:
      F(4x4), 4x fewer multiplies, or F(2x2), by a cost model of batch, map and ISA:
      conv2d_nchwc.cc's winograd4_pays): ResNet-50's alone at
      batch 1 and 8, blocked, took 1.05-1.80x fp32's time in int8; the model with them
      fp32 0.915x fp32's time against 0.997x at batch 8, 0.82x against 0.90x at batch 1
      (AMD Zen 5 held to AVX2, 2026-12-01). With VNNI int8 wins overall (0.60x against
      0.66x with them kept), though 64 channels on 56 x 56 alone is 1.36x.
    (Until the int8 conv ran over the blocked layout, 1x1 convs over 56 x 56 maps stayed
    fp32 too where AVX-512 runs at full width: 1.27-1.75x fp32's time on that Xeon in
    NCHW. Blocked, ResNet-50 with them in int8 took 0.650x fp32's time against 0.672x at
    batch 8, 0.564x against 0.580x at batch 1, AMD Zen 5, 2026-12-01.)"""
    if conv.groups != 1:  # not quantized at all (QConv2d.from_float says why)
        return None
    if isa is None:
        isa = _C.qmatmul_isa()
    if conv.in_channels <= 4:
        products = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1] * conv.out_channels
        if isa != "avx512vnni":
            return ("int8 would be slower: a stem on <= 4 input channels (fp32 runs it as a direct conv; this CPU's "
                    "int8 kernels are not AVX-512 VNNI's)")
        if products < 4096:
            return (f"int8 would be slower: a stem on <= 4 input channels with {products} products per output pixel "
                    "(under 4096; fp32 runs it as a direct conv)")
    if (isa in ("avx2", "scalar") and conv.kernel_size == (3, 3) and conv.stride == (1, 1)
            and conv.padding in ((1, 1), "same") and conv.dilation == (1, 1)
            and min(conv.in_channels, conv.out_channels) >= 64):
        return ("int8 would be slower: a 3x3 conv that fp32 runs by Winograd (fewer multiplies; this CPU has "
                "no VNNI)")
    return None


def _beside_depthwise(model):
    """{id(conv): why} for the 1x1 convs beside a depthwise conv (MobileNet V2's expand
    and project convs): leaf modules in registration order (which is not data flow: a
    model declaring its modules out of order escapes it) with only batch-norms and
    activations between. fp32 runs such a pair as one fused block on maps of 28 x 28 and
    up (conv2d_pw_dw: the expanded rows never leave L2) and beside each other in the
    blocked layout below that; in int8 the 1x1 conv stands alone. MobileNet V2 int8-static
    took 1.19-1.31x fp32's time with them in int8, 0.97x with them all kept fp32 (paired,
    AMD Zen 5, batch 8, 2026-12-01); keeping only the fused ones is not measured."""
    between = (nn.BatchNorm2d, nn.ReLU, nn.ReLU6, nn.Hardswish, nn.Hardsigmoid, nn.SiLU, nn.GELU, nn.Identity)
    leaves = [m for m in model.modules() if next(m.children(), None) is None]

    def depthwise(m):
        return isinstance(m, nn.Conv2d) and m.groups > 1 and m.groups == m.in_channels == m.out_channels

    why = {}
    for i, m in enumerate(leaves):
        if not depthwise(m):
            continue
        for step in (-1, 1):
            j = i + step
            while 0 <= j < len(leaves) and isinstance(leaves[j], between):
                j += step
            if 0 <= j < len(leaves) and isinstance(leaves[j], nn.Conv2d) and leaves[j].kernel_size == (1, 1) \
                    and leaves[j].groups == 1:
                why[id(leaves[j])] = ("int8 would be slower: a 1x1 conv beside a depthwise conv (fp32 runs the pair "
                                      "as one fused block)")
    return why


def _layer_errors(model, pairs, batches):
    """|q(x) - f(x)| / |f(x)| for each (float module f, quantized q) in `pairs` ({name:
    (f, q)}), x the inputs f sees on `batches`: the error each layer adds on its own."""
    import torch

    sums = {name: [0.0, 0.0] for name in pairs}

    def hook(name, q):
        def fn(_m, args, out):
            yq = q(args[0])
            sums[name][0] += float((yq.float() - out.float()).pow(2).sum())
            sums[name][1] += float(out.float().pow(2).sum())
        return fn

    hooks = [f.register_forward_hook(hook(name, q)) for name, (f, q) in pairs.items()]
    try:
        with torch.no_grad(), cal.zenith_linears(model):
            for b in batches:
                cal.run_model(model, b)
    finally:
        for h in hooks:
            h.remove()
    return {name: (num / den) ** 0.5 if den > 0 else num ** 0.5 for name, (num, den) in sums.items()}


def _swap(model, places, modules):
    """Puts modules[i] at each of places[i] (a list of (parent, attribute) per module)."""
    for where, m in zip(places, modules):
        for parent, attr in where:
            setattr(parent, attr, m)


def _within_budget(model, order, pairs, places, batches, max_error):
    """The most layers of `order` (most tolerant first) that can be quantized together
    with the model's output error on `batches` within max_error (binary search: the error
    grows with the layers quantized). Returns (their count, that error)."""
    import torch

    with torch.no_grad(), cal.zenith_linears(model):
        ref = [cal.run_model(model, b) for b in batches]

    def error(k):
        _swap(model, [places[n] for n in order[:k]], [pairs[n][1] for n in order[:k]])
        try:
            with torch.no_grad(), cal.zenith_linears(model):
                outs = [cal.run_model(model, b) for b in batches]
        finally:
            _swap(model, [places[n] for n in order[:k]], [pairs[n][0] for n in order[:k]])
        return max(cal.relative_error(r, o) for r, o in zip(ref, outs))

    lo, hi, err_lo = 0, len(order), 0.0
    err_hi = error(hi)
    if err_hi <= max_error:
        return hi, err_hi
    while hi - lo > 1:  # error(lo) <= max_error < error(hi)
        mid = (lo + hi) // 2
        e = error(mid)
        if e <= max_error:
            lo, err_lo = mid, e
        else:
            hi = mid
    return lo, err_lo


def quantize(model, scheme, *, group_size=None, symmetric=True, include_embeddings=False, exclude=(),
             calibration=None, method="percentile", percentile=99.99, max_error=None, error_batches=8, smooth=None,
             int8_everywhere=False, conv_weight_bits=None, linear_weight_bits=8):
    """Quantizes `model` in place and returns it.

    Weight-only schemes (nn.Linear and transformers' Conv1D layers): "int8" (per output
    channel, symmetric), "int4" (groups of group_size = 32 (default), 64 or 128;
    symmetric=False for a per-group minimum as well), "nf4" (bitsandbytes' normal-float
    codebook, blocks of 64). The kernels quantize activations per block of 32 as they
    arrive (except nf4, which reads them in float).
    INT8 weights and activations, linear and nn.Conv2d layers (ungrouped, zero padding):
    "int8-dynamic": activation scales computed as each call runs (for linear layers per row,
    i.e. per token, as torchao's dynamic INT8 does, where the CPU's int8 GEMM gains by it:
    AVX-512 VNNI; per 64 values on AVX2 from 8 rows, else per 32; per image for convs); "int8-static": one scale per layer from
    `calibration`, an iterable of model inputs (a tensor, a tuple of positional arguments
    or a dict of keyword arguments per batch), by `method`: "percentile" (default, of |x|:
    `percentile`, default 99.99), "minmax" or "entropy" (KL, as TensorRT). The first
    `error_batches` batches also measure the error each layer adds on its own
    (zenith.quant.summary(model).layers[i].error). max_error: a budget for the model's
    output, |y_q - y| / |y| on those batches: layers are quantized most tolerant first
    and the rest, the sensitive ones, stay in floating point (reported in .kept).
    Convs where Zenith's int8 kernels measure slower than its fp32 ones stay in floating
    point, listed in .kept (no warning): stems on <= 4 input channels (with AVX-512 VNNI only
    those under 4096 products per output pixel), 1x1 convs beside a depthwise conv (fp32
    fuses the pair), and on CPUs without VNNI 3x3 stride-1 convs over 64+ channels (fp32
    runs them by Winograd); int8_everywhere=True quantizes them too.
    conv_weight_bits (int8-dynamic, int8-static): 8, or 7 for conv filters of codes within
    +-63 (as ONNX Runtime's opt-in reduce_range): on AVX2 the int8 conv then sums two
    steps' products in 16 bits before widening them, where its input has no negative code
    (after a ReLU; 0.84-0.86x the multiply's time, AMD Zen 3). None (the default): 7 where
    this CPU's int8 kernels are AVX2's, else 8. The choice is the quantizing machine's: a
    model saved and run elsewhere keeps it (summary(model).layers[i].weight_bits).
    linear_weight_bits: 8, or 7 for linear layers' int8 weights ("int8", "int8-dynamic",
    "int8-static"; embeddings and a tied LM head keep 8): AVX2's int8 GEMM on dynamic
    activations (or static ones with no negative code) then sums two steps' products in
    16 bits too, at about 2.8x the error (all-MiniLM-L6-v2, real text: 1 - mean cosine to
    fp32 2.8e-3 against 1.0e-3, min cosine 0.9955 against 0.9983).
    smooth: SmoothQuant's alpha in [0, 1] for the linear layers (int8-static): activation
    channels much larger than the rest (transformers have a few) are divided down, their
    weight columns multiplied up by the same s = max|x|^alpha / max|w|^(1 - alpha), so one
    activation scale serves every channel (all-MiniLM-L6-v2 on real text, minmax: min
    cosine 0.969 without, 0.992 with alpha 0.85). Layers reading one and the same input
    (a transformer's Q, K and V; an encoder-decoder's cross-attention K and V of every
    layer) share one s, max|w| over their weights together, held as one x_smooth tensor
    (state_dict lists it under each name; zenith.save_quantized stores it once), so a
    float32 model compiles them as one qmatmul (one int8 GEMM from 8 rows) where they
    also agree on having a bias and have rows in multiples of 32. Calibration then reads
    the data twice (once with minmax).

    Embeddings stay in floating point unless include_embeddings=True, and so does an
    output layer that shares its weight with one (a tied LM head): quantizing it alone
    would store the matrix twice. With include_embeddings=True, nn.Embedding layers (and
    Gemma's scaled word embedding) become QEmbedding and a tied LM head a QLinear over the
    same bytes. exclude: module names or fnmatch patterns ("lm_head", "*.mlp.*") to leave
    alone, with everything inside them. A layer that cannot be quantized (K not a whole
    number of groups, a grouped conv) stays in floating point: it is reported (a warning,
    and zenith.quant.summary(model).kept), never quantized wrongly. Compile as usual
    afterwards: torch.compile(model, backend="zenith").
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"zenith.quantize: expected an nn.Module, got {type(model).__name__}")
    fmt = scheme_format(scheme, group_size, symmetric)
    _check_options(scheme, calibration, method, percentile, max_error, smooth)
    with_convs = scheme in ACTIVATION
    if conv_weight_bits is not None and (type(conv_weight_bits) is not int or conv_weight_bits not in (7, 8)):
        raise ValueError(f"zenith.quantize: conv_weight_bits is 7 or 8 (None: 7 on AVX2 without VNNI), got "
                         f"{conv_weight_bits!r}")
    if type(linear_weight_bits) is not int or linear_weight_bits not in (7, 8):
        raise ValueError(f"zenith.quantize: linear_weight_bits is 7 or 8, got {linear_weight_bits!r}")
    if linear_weight_bits == 7 and fmt != "int8":
        raise ValueError(f"zenith.quantize: linear_weight_bits=7 is for int8 weights, not {fmt}")
    if conv_weight_bits is not None and not with_convs:
        raise ValueError(f"zenith.quantize: conv_weight_bits is for the schemes that quantize convs "
                         f"(int8-dynamic, int8-static), not {scheme!r}")
    if conv_weight_bits is None:
        conv_weight_bits = default_conv_weight_bits()
    conv_weight_max = _int8_max(conv_weight_bits)
    if isinstance(exclude, str):
        exclude = (exclude,)
    kept = {}
    by_choice = set()  # kept as the options say (a tied LM head without include_embeddings, a conv where int8
    # is slower): no warning
    new = {}  # id(old module) -> replacement (a module reachable under two names is replaced once)
    tied = {}  # id(embedding weight Parameter) -> its QEmbedding, for LM heads that share it
    names = {}  # id(old module) -> first name
    kinds = (nn.Linear, nn.Embedding, nn.Conv2d) if with_convs else (nn.Linear, nn.Embedding)
    modules = [(n, m) for n, m in model.named_modules(remove_duplicate=False)
               if (isinstance(m, kinds) or is_conv1d(m)) and not _excluded(n, exclude)]
    on_meta = [n for n, m in modules if any(p.is_meta for p in m.parameters(recurse=False))]
    if on_meta:  # quantizing would make blocks of nothing, whose forward returns meta tensors
        raise ValueError(f"zenith.quantize: the weights of {', '.join(on_meta[:3])} are on the meta device (no values "
                         f"to quantize); load them first, or load a saved quantized model with zenith.load_quantized")
    if not any(include_embeddings or not isinstance(m, nn.Embedding) for _, m in modules):
        warnings.warn(f"zenith.quantize({scheme!r}): the model has no layer this scheme quantizes (nn.Linear, "
                      f"transformers' Conv1D{', nn.Conv2d' if with_convs else ''}, nn.Embedding with "
                      f"include_embeddings), after `exclude`; nothing changed", stacklevel=2)
    for name, m in modules:
        names.setdefault(id(m), name)
    embeddings = [(n, m) for n, m in modules if isinstance(m, nn.Embedding)]
    # every embedding's weight, excluded ones too: an LM head tied to one is never quantized alone
    emb_weights = {id(m.weight): n for n, m in model.named_modules() if isinstance(m, nn.Embedding)}
    layers = {n: m for n, m in modules if not isinstance(m, nn.Embedding) and names[id(m)] == n}
    scales, batches, smoothing = {}, [], {}
    if scheme == "int8-static":
        smoothable = [n for n, m in layers.items() if not isinstance(m, nn.Conv2d) and id(m.weight) not in emb_weights]
        scales, batches, smoothing = _calibrate(model, layers, calibration, method, percentile, error_batches,
                                                smooth, smoothable)
        for name in layers:
            if name not in scales:
                kept[name] = "the calibration data never reached it (no activation scale)"
    for name, m in embeddings:
        if not include_embeddings or id(m) in new:
            continue
        try:
            q = new[id(m)] = QEmbedding.from_float(m, fmt)
            tied[id(m.weight)] = q
        except Unquantizable as e:
            kept[name] = str(e)
    per_row = scheme == "int8-dynamic"  # linear layers: one activation scale per row
    beside = _beside_depthwise(model)
    for name, m in layers.items():
        if id(m) in new or name in kept:
            continue
        x_scale = scales.get(name)
        if isinstance(m, nn.Conv2d):
            slower = None if int8_everywhere else _int8_conv_slower(m) or beside.get(id(m))
            if slower:
                kept[name] = slower
                by_choice.add(name)
                continue
            try:
                new[id(m)] = QConv2d.from_float(m, x_scale, conv_weight_max)
            except Unquantizable as e:
                kept[name] = str(e)
            continue
        if id(m.weight) in emb_weights:  # an LM head tied to an embedding
            q = tied.get(id(m.weight))
            if q is None:
                kept[name] = (f"its weight is {emb_weights[id(m.weight)]}'s, which stays in floating point "
                              + ("" if include_embeddings else "(pass include_embeddings=True)")).rstrip()
                if not include_embeddings:
                    by_choice.add(name)
            elif isinstance(m, nn.Linear):
                new[id(m)] = QLinear(q.weight, fmt, m.bias, x_scale, row_scale=per_row)
            continue
        try:
            new[id(m)] = QLinear.from_float(m, fmt, x_scale, smoothing.get(name), row_scale=per_row,
                                            int8_max=_int8_max(linear_weight_bits))
        except Unquantizable as e:
            kept[name] = str(e)
    for m in list(layers.values()) + [m for _, m in embeddings]:  # a replacement keeps its module's mode
        if id(m) in new:
            new[id(m)].train(m.training)
    shared = {}  # id(divisor) -> x_smooth of its first layer: siblings hold one tensor, which the
    for name, s in smoothing.items():  # compiled graph reads as one value (one qmatmul for Q, K, V)
        q = new.get(id(layers[name]))
        if isinstance(q, QLinear) and q.x_smooth is not None:
            q.x_smooth = shared.setdefault(id(s), q.x_smooth)
    if id(model) in new:  # the model is itself one layer: nothing holds it, so return the new one
        model = new[id(model)]
    else:
        places = {}  # first name -> every (parent, attribute) holding that module
        for name, m in modules:
            if id(m) in new:
                parent, _, attr = name.rpartition(".")
                places.setdefault(names[id(m)], []).append((model.get_submodule(parent), attr))
        errors = {}
        if scheme == "int8-static":
            pairs = {n: (layers[n], new[id(layers[n])]) for n in layers if id(layers[n]) in new}
            errors = _layer_errors(model, pairs, batches)
            if max_error is not None:
                order = sorted(pairs, key=lambda n: errors[n])
                k, err = _within_budget(model, order, pairs, places, batches, max_error)
                for n in order[k:]:
                    kept[n] = (f"sensitive: {errors[n]:.2e} error on its own; quantizing it breaks the budget "
                               f"max_error={max_error:g}")
                    by_choice.add(n)
                    del new[id(layers[n])]
                log.info("zenith.quantize: %d of %d layers within max_error=%g (output error %.3g)", k, len(order),
                         max_error, err)
        for name, where in places.items():
            m = next(m for n, m in modules if n == name)
            if id(m) in new:
                _swap(model, [where], [new[id(m)]])
        model._zenith_quant_errors = {n: e for n, e in errors.items() if id(layers[n]) in new}
    model._zenith_quant_kept = {**getattr(model, "_zenith_quant_kept", {}), **kept}
    for name, why in kept.items():
        log.info("zenith.quantize: %s stays in floating point: %s", name, why)
    surprising = {n: w for n, w in kept.items() if n not in by_choice}
    if surprising:
        listed = "; ".join(f"{n} ({w})" for n, w in list(surprising.items())[:5])
        more = f"; and {len(surprising) - 5} more" if len(surprising) > 5 else ""
        warnings.warn(f"zenith.quantize({scheme!r}): {len(surprising)} layer(s) stay in floating point: {listed}"
                      f"{more} (zenith.quant.summary(model).kept lists them all)", stacklevel=2)
    # The quantized weights were made in temporaries and copied into weight memory; give
    # the heap they leave back (TinyLlama int4 built layer by layer: peak RSS 1981 -> 1760 MiB).
    _C.release_free_heap()
    return model
