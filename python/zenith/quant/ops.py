"""The torch custom ops a quantized model calls: zenith::qlinear, zenith::qconv2d and
zenith::qembedding.

Dynamo and AOTAutograd keep each as one node (a custom op has no decomposition), which
the importer turns into the native qmatmul / qembedding; their eager implementations
run the same C++ kernels through `zenith._C`. The fake implementations give shapes and
check the weight, so a bad one fails while tracing, with the same message as eagerly.
"""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from zenith import _C
from zenith.quant.formats import check_weight, dequantize

_REFERENCE_ROWS = 16384  # weight rows de-quantized at a time by the reference (bounds its f32 temporary)


def reference_linear(x, w, bias, format):
    """y = x @ dequantize(w)^T + bias in torch, in float32, de-quantizing a slice of rows at
    a time so a large weight (an LM head) never exists in fp32 all at once. (x as it is:
    the kernels' activation quantization is what is compared against this.)"""
    x2 = x.reshape(-1, x.shape[-1]).float()
    outs = [x2 @ dequantize(w[n:n + _REFERENCE_ROWS], format).t()
            for n in range(0, w.shape[0], _REFERENCE_ROWS)]
    y = torch.cat(outs, dim=1) if len(outs) != 1 else outs[0]
    if bias is not None:
        y = y + bias.float()
    return y


def sync_threads():
    """Zenith's kernel threads follow torch.get_num_threads(), as in a compiled call: the
    eager ops and calibration otherwise run on whatever the last compiled call set (or,
    in a process that has compiled nothing, OpenMP's count for the calling thread)."""
    _C.set_num_threads(torch.get_num_threads())


def _check_ids(ids):
    if ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"zenith.qembedding: ids must be int64 or int32, got {ids.dtype}")


def _check_x_mul(x_mul, x_scale, k):
    if x_mul is None:
        return
    if x_scale is None:
        raise ValueError("zenith.qlinear: x_mul (a per-channel multiplier of x) needs static INT8 activations (x_scale)")
    if x_mul.dtype != torch.float32 or tuple(x_mul.shape) != (k,):
        raise ValueError(f"zenith.qlinear: x_mul must be float32 [{k}], one value per channel of x; got "
                         f"{x_mul.dtype} of shape {tuple(x_mul.shape)}")


def _check_linear_scale(x_scale, format, row_scale=False):
    if row_scale:
        if format != "int8" or x_scale is not None:
            raise ValueError("zenith.qlinear: row_scale (one activation scale per row) needs int8 weights and no "
                             f"x_scale, got {format}" + ("" if x_scale is None else f" and x_scale {x_scale}"))
    if x_scale is None:
        return
    if format != "int8":
        raise ValueError(f"zenith.qlinear: x_scale (static INT8 activations) needs int8 weights, got {format}")
    _check_scale(x_scale)


@torch.library.custom_op("zenith::qlinear", mutates_args=())
def qlinear(x: Tensor, w: Tensor, bias: Optional[Tensor], format: str, x_scale: Optional[float] = None,
            row_scale: bool = False, x_mul: Optional[Tensor] = None) -> Tensor:
    """x [..., K] (float) @ dequant(w [N, row_bytes] uint8)^T (+ bias [N]) -> [..., N], in
    x's dtype (computed in float32). x is quantized per block of 32 on the fly (with row_scale
    64 on AVX2 from 8 rows: _C.qmatmul_act_block), or, given
    x_scale (int8 weights), on that one scale (static INT8), or with row_scale (int8
    weights) each row on max|x| / 127 of its own (dynamic INT8 per token) where the CPU's
    int8 GEMM gains by it (AVX-512 VNNI; _C.qmatmul_row_scales()). x_mul (with x_scale):
    float32 [K] that x is multiplied by per channel, in float32, as it is quantized
    (1 / SmoothQuant's divisor s: QLinear's x_smooth), in the kernel's pass over x."""
    k = check_weight(w, format, x.shape[-1])
    _check_linear_scale(x_scale, format, row_scale)
    _check_x_mul(x_mul, x_scale, k)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, k).to(torch.float32).contiguous()
    b = None if bias is None else bias.to(torch.float32).contiguous()
    sync_threads()
    y = _C.qmatmul(x2, w.contiguous(), format, b, x_scale, row_scale, None if x_mul is None else x_mul.contiguous())
    return y.reshape(*lead, w.shape[0]).to(x.dtype)


@qlinear.register_fake
def _(x, w, bias, format, x_scale=None, row_scale=False, x_mul=None):
    k = check_weight(w, format, x.shape[-1])
    _check_linear_scale(x_scale, format, row_scale)
    _check_x_mul(x_mul, x_scale, k)
    return x.new_empty((*x.shape[:-1], w.shape[0]))


def _qlinear_setup(ctx, inputs, output):
    _x, w, bias, format = inputs[:4]
    x_mul = inputs[6] if len(inputs) > 6 else None
    ctx.has_mul = x_mul is not None
    ctx.save_for_backward(w, *([x_mul] if ctx.has_mul else []))
    ctx.format = format
    ctx.bias_dtype = None if bias is None else bias.dtype


def _qlinear_backward(ctx, grad):
    # The weight is frozen (uint8, no gradient); x and bias get theirs, so a quantized
    # model can sit inside a graph that trains other parameters (adapters, norms).
    w, *x_mul = ctx.saved_tensors
    need_x, _, need_bias = ctx.needs_input_grad[:3]
    gx = None
    if need_x:  # the quantization passes the gradient through; x_mul scales it per channel
        gx = grad.float() @ dequantize(w, ctx.format)
        gx = (gx * x_mul[0] if ctx.has_mul else gx).to(grad.dtype)
    gb = grad.float().reshape(-1, grad.shape[-1]).sum(0).to(ctx.bias_dtype) if need_bias else None
    return gx, None, gb, None, None, None, None


qlinear.register_autograd(_qlinear_backward, setup_context=_qlinear_setup)


@torch.library.custom_op("zenith::qembedding", mutates_args=())
def qembedding(w: Tensor, ids: Tensor, format: str) -> Tensor:
    """Rows `ids` of dequant(w [V, row_bytes] uint8) -> float32 [*ids.shape, K]; an id
    outside [0, V) is an IndexError."""
    check_weight(w, format)
    _check_ids(ids)
    sync_threads()
    return _C.qembedding(w.contiguous(), ids.to(torch.int64).contiguous(), format)


@qembedding.register_fake
def _(w, ids, format):
    k = check_weight(w, format)
    _check_ids(ids)
    return w.new_empty((*ids.shape, k), dtype=torch.float32)


def conv_out_size(x_shape, w, kernel, stride, padding, dilation):
    """The output shape of qconv2d, after checking its operands (ValueError / TypeError
    with the reason: the same eagerly and while tracing)."""
    if len(x_shape) != 4:
        raise ValueError(f"zenith.qconv2d: x must be NCHW (4-D), got {len(x_shape)}-D")
    for name, v, lo in (("kernel", kernel, 1), ("stride", stride, 1), ("padding", padding, 0),
                        ("dilation", dilation, 1)):
        if len(v) != 2 or any(int(t) < lo for t in v):
            raise ValueError(f"zenith.qconv2d: {name} must be 2 values >= {lo}, got {list(v)}")
    k = check_weight(w, "int8")
    if k != x_shape[1] * kernel[0] * kernel[1]:
        raise ValueError(f"zenith.qconv2d: the weight has {k} codes per row; {x_shape[1]} channels x kernel "
                         f"{kernel[0]}x{kernel[1]} need {x_shape[1] * kernel[0] * kernel[1]}")
    out = [(x_shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(2)]
    if min(out) < 1:
        raise ValueError("zenith.qconv2d: the kernel is larger than the padded input")
    return (x_shape[0], w.shape[0], *out)


def _check_scale(x_scale):
    if x_scale is None:
        return
    # finite as a float32, and so is its inverse: the kernels quantize by 1 / x_scale
    f = float(torch.tensor(x_scale, dtype=torch.float32)) if x_scale > 0 and x_scale < float("inf") else 0.0
    if not (0 < f < float("inf") and 1.0 / f < float(torch.finfo(torch.float32).max)):
        raise ValueError(f"zenith.qconv2d: x_scale must be a positive finite number with a finite inverse, got "
                         f"{x_scale}")


def fake_quant_act(x, x_scale=None):
    """x as qconv2d's int8 activations see it: round(x / s) clamped to [-127, 127], times s;
    s = x_scale (static) or max|x| / 127 of each image (dynamic)."""
    if x_scale is None:
        amax = x.abs().nan_to_num(0.0, 0.0, 0.0).amax(dim=(1, 2, 3), keepdim=True)
        s = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
    else:
        s = torch.tensor(float(x_scale))
    return torch.clamp(torch.round(x * (1 / s)), -127, 127) * s  # x * (1 / s): as the kernel rounds


def reference_conv2d(x, w, bias, kernel, stride, padding, dilation, x_scale=None):
    """qconv2d in torch: fake-quantized activations (fake_quant_act) against the
    de-quantized filters, in float32 (the judge of the native kernel)."""
    x = x.float()
    wd = dequantize(w, "int8").reshape(w.shape[0], x.shape[1], *kernel)
    return F.conv2d(fake_quant_act(x, x_scale), wd, None if bias is None else bias.float(), list(stride),
                    list(padding), list(dilation))


@torch.library.custom_op("zenith::qconv2d", mutates_args=())
def qconv2d(x: Tensor, w: Tensor, bias: Optional[Tensor], kernel: List[int], stride: List[int], padding: List[int],
            dilation: List[int], x_scale: Optional[float]) -> Tensor:
    """conv2d of x [N, C, H, W] (float) with int8 filters w (uint8 int8 rows [OC, 4 + C *
    KH * KW], torch's (channel, row, column) order) and int8 activations: one scale,
    x_scale (static INT8), or max|x| / 127 per image (None: dynamic). One group. Computed
    in float32, returned in x's dtype."""
    conv_out_size(x.shape, w, kernel, stride, padding, dilation)
    _check_scale(x_scale)
    b = None if bias is None else bias.to(torch.float32).contiguous()
    sync_threads()
    y = _C.qconv2d(x.to(torch.float32).contiguous(), w.contiguous(), b, list(kernel), list(stride), list(padding),
                   list(dilation), x_scale)
    return y.to(x.dtype)


@qconv2d.register_fake
def _(x, w, bias, kernel, stride, padding, dilation, x_scale):
    _check_scale(x_scale)
    return x.new_empty(conv_out_size(x.shape, w, kernel, stride, padding, dilation))
