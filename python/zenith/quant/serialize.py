"""zenith.save_quantized / zenith.load_quantized: a quantized model as one safetensors
file, no pickled code.

The file holds the model's state dict as it is (QLinear / QConv2d / QEmbedding weights
as their uint8 blocks, every other parameter and persistent buffer as it is; a tensor
shared by two names, such as a tied LM head, once) and, in the safetensors metadata
under "zenith.quantized", JSON naming each quantized module, its kind and format and
what its constructor takes besides tensors (static scale, per-row scales, conv geometry,
an embedding's output scale and dtype). Loading needs the model's architecture, built
as usual (on the meta device, so nothing is allocated twice, or on the CPU): each named
module is replaced by its quantized counterpart over the file's bytes, every other
tensor is assigned to its parameter or buffer, and a name the model lacks, a shape that
differs, or a parameter the file does not hold is a ValueError naming it.
"""
from __future__ import annotations

import json
import os

import torch
from torch import nn

from zenith.quant.modules import QConv2d, QEmbedding, QLinear, in_large_pages

META_KEY = "zenith.quantized"
VERSION = 1
_DTYPES = {str(d).removeprefix("torch."): d for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64)}


class _Tensors:
    """The file's tensors by name, read when asked for (a weight read, copied to large
    pages and let go before the next: the load's peak stays near the model's size, not
    twice it); a name in `aliases` reads its target, the same tensor object each time."""

    def __init__(self, path, f, aliases):
        self.path, self.f, self.aliases, self.shared = path, f, aliases, {}
        self.names = set(f.keys())
        for alias, target in aliases.items():
            if target not in self.names:
                _fail(path, f"{alias} names {target}, which the file does not hold")

    def keys(self):
        return sorted(self.names) + sorted(a for a in self.aliases if a not in self.names)

    def __contains__(self, key):
        return key in self.names or key in self.aliases

    def source(self, key):
        return self.aliases.get(key, key)

    def get(self, key):
        if key not in self:
            return None
        source = self.source(key)
        if source in self.shared:
            return self.shared[source]
        try:
            t = self.f.get_tensor(source)
        except Exception as e:
            _fail(self.path, f"its tensor {source} is not readable ({type(e).__name__}: {e})")
        if source in self.aliases.values():  # read under two names: one object for both
            self.shared[source] = t
        return t


def _fail(path, why):
    raise ValueError(f"zenith.load_quantized({os.fspath(path)!r}): {why}")


def _record(name, m):
    if isinstance(m, QLinear):
        return {"name": name, "kind": "linear", "format": m.format, "x_scale": m.x_scale, "row_scale": m.row_scale}
    if isinstance(m, QConv2d):
        return {"name": name, "kind": "conv2d", "in_channels": m.in_channels, "kernel_size": list(m.kernel_size),
                "stride": list(m.stride), "padding": list(m.padding), "dilation": list(m.dilation),
                "x_scale": m.x_scale}
    if isinstance(m, QEmbedding):
        return {"name": name, "kind": "embedding", "format": m.format,
                "embed_scale": None if m.embed_scale is None else float(m.embed_scale),
                "dtype": str(m.dtype).removeprefix("torch.")}
    return None


def save_quantized(model: nn.Module, path) -> None:
    """Writes `model` (quantized by zenith.quantize or loaded by zenith.load_gguf) to
    `path` as safetensors: its state dict, and which modules are quantized and how.
    zenith.load_quantized(skeleton, path) rebuilds it."""
    from safetensors.torch import save_file

    records = [r for name, m in model.named_modules() if (r := _record(name, m)) is not None]
    if not records:
        raise ValueError("zenith.save_quantized: the model has no quantized layer (QLinear, QConv2d, QEmbedding); "
                         "zenith.quantize it first")
    tensors, aliases, seen, storages = {}, {}, {}, set()
    for key, t in model.state_dict().items():
        t = t.detach()
        if t.device.type != "cpu":
            raise ValueError(f"zenith.save_quantized: {key} is on {t.device}; move the model to the CPU first")
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), t.dtype, tuple(t.shape), tuple(t.stride()))
        if ident in seen:  # the same tensor under a second name (a tied head): stored once
            aliases[key] = seen[ident]
            continue
        seen[ident] = key
        storage = t.untyped_storage().data_ptr()
        # safetensors stores each tensor on its own: a view sharing storage with one kept
        # already (or not contiguous) is copied
        tensors[key] = t.contiguous() if storage not in storages and t.is_contiguous() else t.clone()
        storages.add(storage)
    meta = {META_KEY: json.dumps({"version": VERSION, "modules": records, "aliases": aliases})}
    save_file(tensors, os.fspath(path), metadata=meta)


def _check_like(path, key, tensor, old):
    if old is None or old.shape != tensor.shape or old.dtype != tensor.dtype:
        was = "nothing" if old is None else f"{tuple(old.shape)} {str(old.dtype).removeprefix('torch.')}"
        _fail(path, f"{key} is {tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')} in the file, "
                    f"{was} in the model (another architecture or config?)")


def _build(path, rec, tensors, large):
    """The quantized module a record describes, over the file's tensors (each weight copied
    to large pages once, however many modules share it)."""
    name = rec["name"]
    prefix = f"{name}." if name else ""

    def take(attr, required=True):
        t = tensors.get(prefix + attr)
        if t is None and required:
            _fail(path, f"the file holds no {prefix + attr} for its quantized {rec['kind']} {name!r}")
        return t

    source = tensors.source(prefix + "weight")
    if source not in large:  # read here, once however many modules share it, and copied to large pages
        large[source] = in_large_pages(take("weight"))
    w = large[source]
    try:
        if rec["kind"] == "linear":
            return QLinear(w, rec["format"], take("bias", False), rec["x_scale"], take("x_smooth", False),
                           rec["row_scale"])
        if rec["kind"] == "conv2d":
            return QConv2d(w, rec["in_channels"], rec["kernel_size"], rec["stride"], rec["padding"], rec["dilation"],
                           take("bias", False), rec["x_scale"])
        if rec["kind"] == "embedding":
            dtype = _DTYPES.get(rec["dtype"])
            if dtype is None:
                _fail(path, f"embedding {name!r} has dtype {rec['dtype']!r}")
            return QEmbedding(w, rec["format"], rec["embed_scale"], dtype)
    except (KeyError, TypeError) as e:
        _fail(path, f"the record of {name!r} is incomplete ({type(e).__name__}: {e})")
    _fail(path, f"module {name!r} has kind {rec.get('kind')!r}, which this Zenith does not know")


def _expected_shape(module, rec):
    """What the model's own layer says the quantized one must hold (in, out), if it says."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if isinstance(module, nn.Conv2d):
        return module.in_channels * module.kernel_size[0] * module.kernel_size[1], module.out_channels
    if isinstance(module, nn.Embedding):
        return module.embedding_dim, module.num_embeddings
    return None


def _got_shape(q):
    if isinstance(q, QLinear):
        return q.in_features, q.out_features
    if isinstance(q, QConv2d):
        return q.in_channels * q.kernel_size[0] * q.kernel_size[1], q.out_channels
    return q.embedding_dim, q.num_embeddings


def _set(model, name, new):
    parent, _, attr = name.rpartition(".")
    setattr(model.get_submodule(parent), attr, new)


def load_quantized(model: nn.Module, path) -> nn.Module:
    """Loads what zenith.save_quantized wrote into `model`, the same architecture built as
    usual (transformers' from_config under `torch.device("meta")` allocates nothing twice;
    a CPU model works too): its quantized modules are replaced by QLinear / QConv2d /
    QEmbedding over the file's bytes and every other tensor assigned. Returns the model.
    ValueError (naming the file and the tensor or module) for a file that is not one,
    a module the model lacks or whose shape differs, and a parameter the file lacks."""
    from safetensors import SafetensorError, safe_open

    if not os.path.isfile(path):
        raise FileNotFoundError(f"zenith.load_quantized: no such file: {os.fspath(path)!r}")
    try:
        f = safe_open(os.fspath(path), framework="pt")
        meta = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        _fail(path, f"not a readable safetensors file ({type(e).__name__}: {e})")
    if META_KEY not in meta:
        _fail(path, "a safetensors file without Zenith's record of quantized modules (not written by "
                    "zenith.save_quantized)")
    try:
        info = json.loads(meta[META_KEY])
        version, records, aliases = info["version"], info["modules"], info["aliases"]
    except (ValueError, KeyError, TypeError) as e:
        _fail(path, f"its record of quantized modules is not readable ({type(e).__name__}: {e})")
    if version != VERSION:
        _fail(path, f"written in format version {version}; this Zenith reads version {VERSION}")
    tensors = _Tensors(path, f, aliases)

    used, large = set(), {}
    for rec in records:
        name = rec.get("name")
        try:
            old = model.get_submodule(name)
        except (AttributeError, TypeError):
            _fail(path, f"the model has no module {name!r} (the file quantized one there)")
        new = _build(path, rec, tensors, large)
        want, got = _expected_shape(old, rec), _got_shape(new)
        if want is not None and tuple(want) != tuple(got):
            _fail(path, f"{name!r} holds {got[1]} x {got[0]} values in the file; the model's {type(old).__name__} "
                        f"is {want[1]} x {want[0]}")
        _set(model, name, new)
        prefix = f"{name}." if name else ""
        used.update(prefix + a for a in ("weight", "bias", "x_smooth") if prefix + a in tensors)

    made = {}  # one Parameter per file tensor, by its name there: tied parameters stay one
    for key in tensors.keys():
        if key in used:
            continue
        t = tensors.get(key)
        mod_name, _, attr = key.rpartition(".")
        try:
            mod = model.get_submodule(mod_name)
        except AttributeError:
            _fail(path, f"the file's {key} has no place in the model")
        if attr in mod._parameters:
            _check_like(path, key, t, mod._parameters[attr])
            old = mod._parameters[attr]
            source = tensors.source(key)  # (by name: an id may be reused once a tensor is let go)
            p = made.get(source)
            if p is None:
                p = made[source] = nn.Parameter(t, requires_grad=old.requires_grad)
            mod._parameters[attr] = p
        elif attr in mod._buffers and attr not in mod._non_persistent_buffers_set:
            _check_like(path, key, t, mod._buffers[attr])
            mod._buffers[attr] = t
        else:
            _fail(path, f"the file's {key} has no place in the model")
        used.add(key)

    missing = [k for k in model.state_dict() if k not in used]
    if missing:
        _fail(path, f"the file holds no tensor for {', '.join(missing[:8])}" + (" ..." if len(missing) > 8 else ""))
    left = [n for n, b in model.named_buffers() if b.is_meta]
    if left:  # computed, not stored (rotary frequencies): made as the model makes them
        from zenith.quant.gguf import _materialize_buffers

        _materialize_buffers(model, path, _fail)
    return model
