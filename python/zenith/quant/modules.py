"""QLinear and QEmbedding: modules that hold a quantized weight and call the custom ops."""
from __future__ import annotations

import sys

import torch
from torch import nn

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


class QLinear(nn.Module):
    """y = x @ dequant(weight)^T + bias. `weight` is a uint8 buffer [out_features,
    row_bytes] in `format` (zenith.quant.formats); bias an optional float parameter."""

    def __init__(self, weight, format, bias=None):
        super().__init__()
        self.in_features = check_weight(weight, format)
        self.out_features = weight.shape[0]
        self.format = get_format(format).name
        self.register_buffer("weight", weight)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=bias.requires_grad)

    @classmethod
    def from_float(cls, module, format):
        """From an nn.Linear or a transformers Conv1D (its [in, out] weight transposed)."""
        if isinstance(module, nn.Linear):
            w = module.weight
        elif is_conv1d(module):
            w = module.weight.t()
        else:
            raise Unquantizable(f"{type(module).__name__} is not a linear layer")
        try:
            q = quantize_weight(w.detach(), format)
        except ValueError as e:
            raise Unquantizable(str(e)) from None
        return cls(q, format, module.bias)

    def forward(self, x):
        return torch.ops.zenith.qlinear(x, self.weight, self.bias, self.format)

    @property
    def nbytes(self):
        return self.weight.numel()

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"format={self.format}, bytes={_format_bytes(self.nbytes)} "
                f"(fp32 {_format_bytes(self.in_features * self.out_features * 4)})")


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
            q = quantize_weight(module.weight.detach(), format)
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
