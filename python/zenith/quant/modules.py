"""QLinear, QConv2d and QEmbedding: modules that hold a quantized weight and call the custom ops."""
from __future__ import annotations

import sys

import torch
from torch import nn

from zenith import _C
from zenith.quant import ops  # noqa: F401  (registers torch.ops.zenith.*)
from zenith.quant.formats import check_weight, get_format, quantize_weight


class Unquantizable(ValueError):
    """A layer that stays as it is; the message says why (zenith.quantize reports it)."""


def _conv1d_class():
    """transformers' Conv1D (GPT-2's linear layer, weight stored [in, out]) if transformers
    is loaded; no import of it otherwise."""
    mod = sys.modules.get("transformers.pytorch_utils")
    return getattr(mod, "Conv1D", None)


def is_conv1d(module):
    cls = _conv1d_class()
    return cls is not None and isinstance(module, cls)


def _format_bytes(n):
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB" if n >= 2**10 else f"{n} B"


def in_large_pages(q, copied=None):
    """A quantized weight just made, copied into memory asked for 2 MiB pages
    (zenith._C.weight_buffer) if it is a CPU tensor of 2 MiB or more; else q. Decode
    streams every weight once per token, and on 4 KiB pages each one is a TLB miss
    (TinyLlama-1.1B decode, Intel Xeon 6/167: int4 1.20x the tokens/s, int8 1.11x).
    copied: None, or called with the bytes copied so far after each 16 MiB of the copy
    (load_gguf frees the file's pages under the part done as it goes)."""
    nbytes = q.numel() * q.element_size()
    if q.device.type != "cpu" or nbytes < _C.LARGE_PAGE_BYTES:
        return q
    out = _C.weight_buffer(nbytes).view(q.dtype).view(q.shape)
    if copied is None:
        out.copy_(q)
        return out
    src, dst, step = q.reshape(-1), out.view(-1), (16 << 20) // q.element_size()
    for i in range(0, src.numel(), step):
        dst[i:i + step].copy_(src[i:i + step])
        copied(min(src.numel(), i + step) * q.element_size())
    return out


class QLinear(nn.Module):
    """y = x @ dequant(weight)^T + bias. `weight` is a uint8 buffer [out_features,
    row_bytes] in `format` (zenith.quant.formats); bias an optional float parameter.
    x is quantized per block of 32 values as it arrives, or, with `x_scale` (int8 weights:
    static INT8, from calibration), on that one scale, or, with `row_scale` (int8 weights:
    dynamic INT8), each row (token) on max|x| / 127 of its own where the CPU's int8 GEMM
    gains by it (AVX-512 VNNI; per 64 values on AVX2 from 8 rows, else per 32). `x_smooth` (static
    only), a float [in_features]: x is multiplied by it before it is quantized, and `weight` holds the
    float weight's columns divided by it (SmoothQuant: activation channels far larger than
    the rest moved into the weights, which are quantized per output channel)."""

    def __init__(self, weight, format, bias=None, x_scale=None, x_smooth=None, row_scale=False):
        super().__init__()
        self.in_features = check_weight(weight, format)
        self.out_features = weight.shape[0]
        self.format = get_format(format).name
        if x_scale is not None and self.format != "int8":
            raise ValueError(f"QLinear: x_scale (static INT8 activations) needs int8 weights, got {self.format}")
        if row_scale and (self.format != "int8" or x_scale is not None):
            raise ValueError("QLinear: row_scale (dynamic INT8 per row) needs int8 weights and no x_scale")
        if x_smooth is not None:
            if x_scale is None:
                raise ValueError("QLinear: x_smooth needs static INT8 activations (x_scale)")
            # (the tensor itself where it is float32 already: layers sharing one, Q, K and V,
            # keep sharing it, saved and loaded too, and compiled read it as one value)
            x_smooth = torch.as_tensor(x_smooth, dtype=torch.float32)
            if x_smooth.requires_grad:
                x_smooth = x_smooth.detach()
            if x_smooth.shape != (self.in_features,) or not bool((torch.isfinite(x_smooth) & (x_smooth > 0)).all()):
                raise ValueError(f"QLinear: x_smooth must be [{self.in_features}] positive finite values")
        self.register_buffer("weight", weight)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=bias.requires_grad)
        self.x_scale = None if x_scale is None else float(x_scale)
        self.row_scale = bool(row_scale)
        self.register_buffer("x_smooth", x_smooth)

    @classmethod
    def from_float(cls, module, format, x_scale=None, smooth=None, row_scale=False, int8_max=127):
        """From an nn.Linear or a transformers Conv1D (its [in, out] weight transposed).
        smooth: the per-input-channel divisor s of SmoothQuant (static INT8): the weight is
        quantized as w * s and x is multiplied by 1 / s before it is quantized. row_scale:
        dynamic INT8 with one activation scale per row. int8_max: the largest int8 code (63:
        7-bit codes, which AVX2's int8 GEMM multiplies faster; quant_avx2.cc)."""
        if isinstance(module, nn.Linear):
            w = module.weight
        elif is_conv1d(module):
            w = module.weight.t()
        else:
            raise Unquantizable(f"{type(module).__name__} is not a linear layer")
        w = w.detach()
        if smooth is not None:
            w = w.float() * smooth.to(w.device, torch.float32)
        try:
            q = in_large_pages(quantize_weight(w, format, int8_max))
        except ValueError as e:
            raise Unquantizable(str(e)) from None
        return cls(q, format, module.bias, x_scale, None if smooth is None else 1.0 / smooth.float(), row_scale)

    def forward(self, x):
        dtype = x.dtype
        # The op computes in float32 (and converts back); x in float32 here is what the
        # compiled graph's qmatmul takes, so a bf16 / fp16 model's layers run natively too.
        if dtype != torch.float32:
            x = x.float()
        # x_smooth goes into the op, which multiplies each row by it in float32 as it
        # quantizes the row: no pass of its own over x (BERT-base has 73 such multiplies a
        # call; as muls of their own, 1.05x the time in a quiet minute, more on a busy host).
        # float32 even after model.to(bfloat16), which casts buffers.
        mul = self.x_smooth
        if mul is not None and mul.dtype != torch.float32:
            mul = mul.float()
        y = torch.ops.zenith.qlinear(x, self.weight, self.bias, self.format, self.x_scale, self.row_scale, mul)
        return y if y.dtype == dtype else y.to(dtype)

    @property
    def nbytes(self):
        return self.weight.numel()

    def extra_repr(self):
        scale = "" if self.x_scale is None else f", x_scale={self.x_scale:.4g}"
        scale += ", row_scale" if self.row_scale else ""
        scale += "" if self.x_smooth is None else ", smoothed"
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"format={self.format}{scale}, bytes={_format_bytes(self.nbytes)} "
                f"(fp32 {_format_bytes(self.in_features * self.out_features * 4)})")


class QConv2d(nn.Module):
    """conv2d with int8 filters (per output channel, symmetric) and int8 activations:
    `x_scale` their one scale (static INT8, from calibration), or None for max|x| / 127
    of each image (dynamic). `weight` is a uint8 buffer of int8 rows [out_channels, 4 +
    in_channels * KH * KW]; bias an optional float parameter. One group, zero padding."""

    def __init__(self, weight, in_channels, kernel_size, stride=1, padding=0, dilation=1, bias=None, x_scale=None):
        super().__init__()
        pair = torch.nn.modules.utils._pair
        self.in_channels = int(in_channels)
        self.kernel_size, self.stride, self.padding, self.dilation = (
            tuple(int(v) for v in pair(a)) for a in (kernel_size, stride, padding, dilation))
        k = check_weight(weight, "int8")
        if k != self.in_channels * self.kernel_size[0] * self.kernel_size[1]:
            raise ValueError(f"QConv2d: int8 rows of {k} codes do not hold {self.in_channels} channels x kernel "
                             f"{self.kernel_size}")
        self.out_channels = weight.shape[0]
        self.format = "int8"
        self.register_buffer("weight", weight)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=bias.requires_grad)
        self.x_scale = None if x_scale is None else float(x_scale)

    @classmethod
    def from_float(cls, module, x_scale=None, weight_max=127):
        """weight_max: the largest filter code (63: 7-bit codes, which AVX2's int8 conv
        tiles multiply faster; quant_avx2.cc)."""
        if not isinstance(module, nn.Conv2d):
            raise Unquantizable(f"{type(module).__name__} is not a Conv2d")
        if module.groups != 1:
            raise Unquantizable(f"a grouped conv ({module.groups} groups; int8 convs are ungrouped)")
        if module.padding_mode != "zeros" or isinstance(module.padding, str):
            raise Unquantizable(f"padding {module.padding!r} / {module.padding_mode!r} (int8 convs take explicit "
                                f"zero padding)")
        w = module.weight.detach().float().reshape(module.out_channels, -1)
        return cls(quantize_weight(w, "int8", weight_max), module.in_channels, module.kernel_size, module.stride,
                   module.padding, module.dilation, module.bias, x_scale)

    def forward(self, x):
        return torch.ops.zenith.qconv2d(x, self.weight, self.bias, list(self.kernel_size), list(self.stride),
                                        list(self.padding), list(self.dilation), self.x_scale)

    @property
    def nbytes(self):
        return self.weight.numel()

    def extra_repr(self):
        scale = "dynamic" if self.x_scale is None else f"{self.x_scale:.4g}"
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, bias={self.bias is not None}, format=int8, "
                f"x_scale={scale}, bytes={_format_bytes(self.nbytes)}")


class QEmbedding(nn.Module):
    """Rows of dequant(weight) for the ids, times `embed_scale` if the embedding it
    replaces scaled its output (Gemma's scaled word embedding), in `dtype`."""

    def __init__(self, weight, format, embed_scale=None, dtype=torch.float32):
        super().__init__()
        self.embedding_dim = check_weight(weight, format)
        self.num_embeddings = weight.shape[0]
        self.format = get_format(format).name
        self.dtype = dtype
        self.register_buffer("weight", weight)
        if embed_scale is not None:
            embed_scale = torch.as_tensor(embed_scale, dtype=torch.float32)
        self.register_buffer("embed_scale", embed_scale, persistent=False)

    @staticmethod
    def wrapper_scale(module):
        """The output scale an embedding applies on top of nn.Embedding's lookup: None for a
        plain nn.Embedding, its embed_scale for a scaled word embedding (transformers'
        Gemma/Gemma 3: lookup * embed_scale); Unquantizable for any other forward."""
        if not isinstance(module, nn.Embedding):
            raise Unquantizable(f"{type(module).__name__} is not an embedding")
        if module.max_norm is not None:
            raise Unquantizable("max_norm renormalises the weight on lookup")
        if type(module).forward is nn.Embedding.forward:
            return None
        if type(module).__name__.endswith("ScaledWordEmbedding"):
            # the float transformers keeps next to the buffer (which is on meta in a model
            # built there), else the buffer
            scale = getattr(module, "scalar_embed_scale", None)
            if scale is not None:
                return torch.tensor(scale, dtype=torch.float32)
            scale = getattr(module, "embed_scale", None)
            if isinstance(scale, torch.Tensor) and not scale.is_meta:
                return scale.detach().float().clone()
        raise Unquantizable(f"{type(module).__name__} changes nn.Embedding's forward in a way Zenith does not know")

    @classmethod
    def from_float(cls, module, format):
        scale = cls.wrapper_scale(module)
        try:
            q = in_large_pages(quantize_weight(module.weight.detach(), format))
        except ValueError as e:
            raise Unquantizable(str(e)) from None
        return cls(q, format, scale, module.weight.dtype)

    def forward(self, ids):
        y = torch.ops.zenith.qembedding(self.weight, ids, self.format)
        if self.embed_scale is not None:
            y = y * self.embed_scale
        return y if self.dtype == torch.float32 else y.to(self.dtype)

    @property
    def nbytes(self):
        return self.weight.numel()

    def extra_repr(self):
        scale = "" if self.embed_scale is None else f", embed_scale={float(self.embed_scale):.4g}"
        return (f"{self.num_embeddings}, {self.embedding_dim}, format={self.format}{scale}, "
                f"bytes={_format_bytes(self.nbytes)} (fp32 {_format_bytes(self.num_embeddings * self.embedding_dim * 4)})")
