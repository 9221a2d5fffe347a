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
tensor is assigned to its parameter or buffer (buffers outside the state dict are stored
too: a meta-device model has no values for them), and a name the model lacks, a shape,
bias or conv geometry that differs, or a parameter the file does not hold is a
ValueError naming it.
"""
from __future__ import annotations

import json
import os

import torch
from torch import nn

from zenith.quant.modules import QConv2d, QEmbedding, QLinear, in_large_pages, is_conv1d

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
        return {"name": name, "kind": "linear", "format": m.format, "x_scale": m.x_scale, "row_scale": m.row_scale,
                "bias": m.bias is not None, "smoothed": m.x_smooth is not None}
    if isinstance(m, QConv2d):
        return {"name": name, "kind": "conv2d", "in_channels": m.in_channels, "kernel_size": list(m.kernel_size),
                "stride": list(m.stride), "padding": list(m.padding), "dilation": list(m.dilation),
                "x_scale": m.x_scale, "bias": m.bias is not None}
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

    records, first = [], {}
    for name, m in model.named_modules(remove_duplicate=False):
        r = _record(name, m)
        if r is None:
            continue
        if id(m) in first:  # one module under a second name: the same object again when loaded
            r = {"name": name, "same_as": first[id(m)]}
        first.setdefault(id(m), name)
        records.append(r)
    if not records:
        raise ValueError("zenith.save_quantized: the model has no quantized layer (QLinear, QConv2d, QEmbedding); "
                         "zenith.quantize it first")
    state = model.state_dict()
    # Buffers outside the state dict (rotary frequencies, a scaled embedding's scale): a
    # model built on the meta device has no values for them, so they are stored too.
    buffers = {f"{mod}.{b}" if mod else b: t for mod, m in model.named_modules()
               for b, t in m._buffers.items() if t is not None and b in m._non_persistent_buffers_set}
    buffers = {k: t for k, t in buffers.items() if k not in state}
    tensors, aliases, seen, storages = {}, {}, {}, set()
    for key, t in {**state, **buffers}.items():
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
    meta = {META_KEY: json.dumps({"version": VERSION, "modules": records, "aliases": aliases,
                                  "buffers": sorted(buffers)})}
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
        bias = take("bias") if rec.get("bias") else None
        if rec["kind"] == "linear":
            return QLinear(w, rec["format"], bias, rec["x_scale"], take("x_smooth") if rec.get("smoothed") else None,
                           rec["row_scale"])
        if rec["kind"] == "conv2d":
            return QConv2d(w, rec["in_channels"], rec["kernel_size"], rec["stride"], rec["padding"], rec["dilation"],
                           bias, rec["x_scale"])
        if rec["kind"] == "embedding":
            dtype = _DTYPES.get(rec["dtype"])
            if dtype is None:
                _fail(path, f"embedding {name!r} has dtype {rec['dtype']!r}")
            return QEmbedding(w, rec["format"], rec["embed_scale"], dtype)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith("zenith.load_quantized("):
            raise
        _fail(path, f"its quantized module {name!r} cannot be built ({type(e).__name__}: {e})")
    _fail(path, f"module {name!r} has kind {rec.get('kind')!r}, which this Zenith does not know")


def _mismatch(old, new):
    """How the model's own layer `old` differs from the quantized `new` the file describes
    (shape, bias, a conv's geometry), or None. Only layers Zenith quantizes from are
    compared; another module there (already quantized, a custom class) is replaced as is."""
    if isinstance(new, QEmbedding):
        if isinstance(old, nn.Embedding) and (old.num_embeddings, old.embedding_dim) != (new.num_embeddings,
                                                                                          new.embedding_dim):
            return (f"holds {new.num_embeddings} x {new.embedding_dim} values in the file; the model's "
                    f"{type(old).__name__} is {old.num_embeddings} x {old.embedding_dim}")
        return None
    if isinstance(old, nn.Linear):
        want = old.in_features, old.out_features
    elif is_conv1d(old):
        want = tuple(old.weight.shape)  # [in, out]
    elif isinstance(old, nn.Conv2d) and isinstance(new, QConv2d):
        want = old.in_channels * old.kernel_size[0] * old.kernel_size[1], old.out_channels
        geometry = lambda m: (tuple(m.kernel_size), tuple(m.stride), tuple(m.padding), tuple(m.dilation))  # noqa
        if old.groups != 1 or geometry(old) != geometry(new) or isinstance(old.padding, str):
            return (f"is a conv with kernel, stride, padding, dilation {geometry(new)} in the file; the model's has "
                    f"{geometry(old)}, {old.groups} group(s)")
    else:
        return None
    got = (new.in_features, new.out_features) if isinstance(new, QLinear) else (
        new.in_channels * new.kernel_size[0] * new.kernel_size[1], new.out_channels)
    if tuple(want) != tuple(got):
        return f"holds {got[1]} x {got[0]} values in the file; the model's {type(old).__name__} is {want[1]} x {want[0]}"
    if (getattr(old, "bias", None) is None) != (new.bias is None):
        return (f"has {'a' if new.bias is not None else 'no'} bias in the file; the model's "
                f"{type(old).__name__} has {'a' if old.bias is not None else 'none'}")
    return None


def _set(model, name, new):
    parent, _, attr = name.rpartition(".")
    setattr(model.get_submodule(parent), attr, new)


def load_quantized(model: nn.Module, path) -> nn.Module:
    """Loads what zenith.save_quantized wrote into `model`, the same architecture built as
    usual (transformers' from_config under `torch.device("meta")` allocates nothing twice;
    a CPU model works too): its quantized modules are replaced by QLinear / QConv2d /
    QEmbedding over the file's bytes (a module saved under two names is one again) and
    every other tensor assigned, buffers outside the state dict included. Returns the
    model (the quantized layer itself when the model was one layer). ValueError (naming
    the file and the tensor or module) for a file that is not one, a module the model
    lacks or whose shape, bias or conv geometry differs, and a parameter the file lacks."""
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

    used, large, built = set(), {}, {}
    for rec in records:
        name = rec.get("name")
        try:
            old = model.get_submodule(name)
        except (AttributeError, TypeError):
            _fail(path, f"the model has no module {name!r} (the file quantized one there)")
        if "same_as" in rec:  # one module under two names, as saved
            if rec["same_as"] not in built:
                _fail(path, f"{name!r} is the same module as {rec['same_as']!r}, which the file does not quantize")
            new = built[rec["same_as"]]
        else:
            new = _build(path, rec, tensors, large)
            why = _mismatch(old, new)
            if why:
                _fail(path, f"{name!r} {why}")
            if getattr(new, "bias", None) is not None and isinstance(getattr(old, "bias", None), torch.Tensor):
                new.bias.requires_grad_(old.bias.requires_grad)
        built[name] = new
        if name:
            _set(model, name, new)
        else:  # the model is the quantized layer itself
            model = new
        prefix = f"{name}." if name else ""
        used.update(prefix + a for a in ("weight", "bias", "x_smooth") if prefix + a in tensors)

    buffer_names = set(info.get("buffers", ()))
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
        if key in buffer_names:  # outside the state dict, stored for a model built on the meta device
            if not isinstance(mod._buffers.get(attr), torch.Tensor):
                _fail(path, f"the file's buffer {key} has no place in the model")
            _check_like(path, key, t, mod._buffers[attr])
            mod._buffers[attr] = t
        elif attr in mod._parameters:
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
