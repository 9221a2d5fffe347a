"""zenith.quantize: weight-only quantization of a model's linear layers (and, if asked,
its embeddings), in place."""
from __future__ import annotations

import fnmatch
import logging
import warnings
from dataclasses import dataclass, field

from torch import nn

from zenith.quant.formats import fp32_bytes
from zenith.quant.modules import QEmbedding, QLinear, Unquantizable, is_conv1d

log = logging.getLogger("zenith")

WEIGHT_ONLY = ("int8", "int4", "nf4")
LATER = ("int8-dynamic", "int8-static")  # issue 16's activation-quantized schemes, not built yet
SCHEMES = WEIGHT_ONLY + LATER
INT4_GROUPS = {32: ("q4_0", "q4_1"), 64: ("int4_g64", "uint4_g64"), 128: ("int4_g128", "uint4_g128")}


def scheme_format(scheme, group_size=None, symmetric=True):
    """The weight format a scheme and its options give (see zenith.quant.formats)."""
    if scheme in LATER:
        raise NotImplementedError(
            f"zenith.quantize: scheme {scheme!r} (activation quantization) is not built yet; the weight-only "
            f"schemes {', '.join(map(repr, WEIGHT_ONLY))} exist today")
    if scheme not in WEIGHT_ONLY:
        raise ValueError(f"zenith.quantize: unknown scheme {scheme!r}; schemes: {', '.join(map(repr, SCHEMES))}")
    if scheme == "int4":
        g = 32 if group_size is None else group_size
        if g not in INT4_GROUPS:
            raise ValueError(f"zenith.quantize: int4 group_size must be one of {', '.join(map(str, INT4_GROUPS))}, "
                             f"got {group_size!r}")
        return INT4_GROUPS[g][0 if symmetric else 1]
    if not symmetric:
        raise ValueError(f"zenith.quantize: {scheme} is symmetric only (asymmetric: scheme='int4', symmetric=False)")
    if scheme == "int8":
        if group_size is not None:
            raise ValueError("zenith.quantize: int8 has one scale per output channel; group_size does not apply")
        return "int8"
    if group_size not in (None, 64):
        raise ValueError(f"zenith.quantize: nf4 uses blocks of 64 (as bitsandbytes does), got group_size={group_size!r}")
    return "nf4"


@dataclass
class QuantLayer:
    name: str
    kind: str  # "linear" | "embedding"
    format: str
    bytes: int  # of the quantized weight (shared weights: counted at their first layer only)
    fp32_bytes: int  # the same weight in fp32 (shared: counted once too)


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
    s = QuantSummary(kept=dict(getattr(model, "_zenith_quant_kept", {})))
    seen = set()
    for name, m in model.named_modules():
        if isinstance(m, (QLinear, QEmbedding)):
            key = (m.weight.data_ptr(), m.weight.shape)
            shared = key in seen
            seen.add(key)
            s.layers.append(QuantLayer(name, "linear" if isinstance(m, QLinear) else "embedding", m.format,
                                       0 if shared else m.nbytes, 0 if shared else fp32_bytes(m.weight, m.format)))
    return s


def _excluded(name, patterns):
    parts = name.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(p, pat) for p in prefixes for pat in patterns)


def quantize(model, scheme, *, group_size=None, symmetric=True, include_embeddings=False, exclude=()):
    """Quantizes the weights of `model` in place and returns it.

    scheme: "int8" (per output channel, symmetric), "int4" (groups of group_size = 32
    (default), 64 or 128; symmetric=False for a per-group minimum as well), "nf4"
    (bitsandbytes' normal-float codebook, blocks of 64). "int8-dynamic" and
    "int8-static" are not built yet (NotImplementedError).

    nn.Linear and transformers' Conv1D (GPT-2) layers become QLinear. Embeddings stay in
    floating point unless include_embeddings=True, and so does an output layer that shares
    its weight with one (a tied LM head): quantizing it alone would store the matrix twice.
    With include_embeddings=True, nn.Embedding layers (and Gemma's scaled word embedding)
    become QEmbedding and a tied LM head a QLinear over the same bytes.
    exclude: module names or fnmatch patterns ("lm_head", "*.mlp.*") to leave alone, with
    everything inside them. A layer whose K is not a whole number of groups stays in
    floating point: it is reported (a warning, and zenith.quant.summary(model).kept), never
    quantized wrongly. Compile as usual afterwards: torch.compile(model, backend="zenith").
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"zenith.quantize: expected an nn.Module, got {type(model).__name__}")
    fmt = scheme_format(scheme, group_size, symmetric)
    if isinstance(exclude, str):
        exclude = (exclude,)
    kept = {}
    by_choice = set()  # kept as the options say (a tied LM head without include_embeddings): no warning
    new = {}  # id(old module) -> replacement (a module reachable under two names is replaced once)
    tied = {}  # id(embedding weight Parameter) -> its QEmbedding, for LM heads that share it
    names = {}  # id(old module) -> first name
    modules = [(n, m) for n, m in model.named_modules(remove_duplicate=False)
               if (isinstance(m, (nn.Linear, nn.Embedding)) or is_conv1d(m)) and not _excluded(n, exclude)]
    for name, m in modules:
        names.setdefault(id(m), name)
    embeddings = [(n, m) for n, m in modules if isinstance(m, nn.Embedding)]
    # every embedding's weight, excluded ones too: an LM head tied to one is never quantized alone
    emb_weights = {id(m.weight): n for n, m in model.named_modules() if isinstance(m, nn.Embedding)}
    for name, m in embeddings:
        if not include_embeddings or id(m) in new:
            continue
        try:
            q = new[id(m)] = QEmbedding.from_float(m, fmt)
            tied[id(m.weight)] = q
        except Unquantizable as e:
            kept[name] = str(e)
    for name, m in modules:
        if isinstance(m, nn.Embedding) or id(m) in new or names[id(m)] != name:
            continue
        if id(m.weight) in emb_weights:  # an LM head tied to an embedding
            q = tied.get(id(m.weight))
            if q is None:
                kept[name] = (f"its weight is {emb_weights[id(m.weight)]}'s, which stays in floating point "
                              + ("" if include_embeddings else "(pass include_embeddings=True)")).rstrip()
                if not include_embeddings:
                    by_choice.add(name)
            elif isinstance(m, nn.Linear):
                new[id(m)] = QLinear(q.weight, fmt, m.bias)
            continue
        try:
            new[id(m)] = QLinear.from_float(m, fmt)
        except Unquantizable as e:
            kept[name] = str(e)
    if id(model) in new:  # the model is itself one layer: nothing holds it, so return the new one
        model = new[id(model)]
    else:
        for name, m in modules:
            if id(m) in new:
                parent, _, attr = name.rpartition(".")
                setattr(model.get_submodule(parent), attr, new[id(m)])
    model._zenith_quant_kept = {**getattr(model, "_zenith_quant_kept", {}), **kept}
    for name, why in kept.items():
        log.info("zenith.quantize: %s stays in floating point: %s", name, why)
    surprising = {n: w for n, w in kept.items() if n not in by_choice}
    if surprising:
        listed = "; ".join(f"{n} ({w})" for n, w in list(surprising.items())[:5])
        more = f"; and {len(surprising) - 5} more" if len(surprising) > 5 else ""
        warnings.warn(f"zenith.quantize({scheme!r}): {len(surprising)} layer(s) stay in floating point: {listed}"
                      f"{more} (zenith.quant.summary(model).kept lists them all)", stacklevel=2)
    return model
