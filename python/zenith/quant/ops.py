"""The torch custom ops a quantized model calls: zenith::qlinear and zenith::qembedding.

Dynamo and AOTAutograd keep each as one node (a custom op has no decomposition), which
the importer turns into the native qmatmul / qembedding; their eager implementations
run the same C++ kernels through `zenith._C`. The fake implementations give shapes and
check the weight, so a bad one fails while tracing, with the same message as eagerly.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from zenith import _C
from zenith.quant.formats import check_weight, dequantize

_REFERENCE_ROWS = 16384  # weight rows de-quantized at a time by the reference (bounds its f32 temporary)


def reference_linear(x, w, bias, format):
    """y = x @ dequantize(w)^T + bias in torch, in float32, de-quantizing a slice of rows at
    a time so a large weight (an LM head) never exists in fp32 all at once."""
    x2 = x.reshape(-1, x.shape[-1]).float()
    outs = [x2 @ dequantize(w[n:n + _REFERENCE_ROWS], format).t()
            for n in range(0, w.shape[0], _REFERENCE_ROWS)]
    y = torch.cat(outs, dim=1) if len(outs) != 1 else outs[0]
    if bias is not None:
        y = y + bias.float()
    return y


def _check_ids(ids):
    if ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"zenith.qembedding: ids must be int64 or int32, got {ids.dtype}")


@torch.library.custom_op("zenith::qlinear", mutates_args=())
def qlinear(x: Tensor, w: Tensor, bias: Optional[Tensor], format: str) -> Tensor:
    """x [..., K] (float) @ dequant(w [N, row_bytes] uint8)^T (+ bias [N]) -> [..., N], in
    x's dtype (computed in float32)."""
    k = check_weight(w, format, x.shape[-1])
    lead = x.shape[:-1]
    x2 = x.reshape(-1, k).to(torch.float32).contiguous()
    b = None if bias is None else bias.to(torch.float32).contiguous()
    y = _C.qmatmul(x2, w.contiguous(), format, b)
    return y.reshape(*lead, w.shape[0]).to(x.dtype)


@qlinear.register_fake
def _(x, w, bias, format):
    check_weight(w, format, x.shape[-1])
    return x.new_empty((*x.shape[:-1], w.shape[0]))


def _qlinear_setup(ctx, inputs, output):
    _x, w, bias, format = inputs
    ctx.save_for_backward(w)
    ctx.format = format
    ctx.bias_dtype = None if bias is None else bias.dtype


def _qlinear_backward(ctx, grad):
    # The weight is frozen (uint8, no gradient); x and bias get theirs, so a quantized
    # model can sit inside a graph that trains other parameters (adapters, norms).
    (w,) = ctx.saved_tensors
    need_x, _, need_bias, _ = ctx.needs_input_grad
    gx = (grad.float() @ dequantize(w, ctx.format)).to(grad.dtype) if need_x else None
    gb = grad.float().reshape(-1, grad.shape[-1]).sum(0).to(ctx.bias_dtype) if need_bias else None
    return gx, None, gb, None


qlinear.register_autograd(_qlinear_backward, setup_context=_qlinear_setup)


@torch.library.custom_op("zenith::qembedding", mutates_args=())
def qembedding(w: Tensor, ids: Tensor, format: str) -> Tensor:
    """Rows `ids` of dequant(w [V, row_bytes] uint8) -> float32 [*ids.shape, K]; an id
    outside [0, V) is an IndexError."""
    check_weight(w, format)
    _check_ids(ids)
    return _C.qembedding(w.contiguous(), ids.to(torch.int64).contiguous(), format)


@qembedding.register_fake
def _(w, ids, format):
    k = check_weight(w, format)
    _check_ids(ids)
    return w.new_empty((*ids.shape, k), dtype=torch.float32)
