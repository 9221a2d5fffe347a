"""zenith.load_gguf: a GGUF file as a transformers model whose layers keep the file's blocks.

The model is built on the meta device from the file's metadata and then filled: each
quantized linear weight becomes a QLinear over the file's own bytes (a memory map, no
copy), the token embedding a QEmbedding (sharing its bytes with a tied LM head), and F32 /
F16 tensors parameters. No fp32 copy of a quantized weight is made, so resident memory
stays near the file's size. Architectures: gemma3, llama (their fix-ups below).

The header is read here (a short walk that skips the vocabulary): the gguf package's
GGUFReader makes a numpy object for every vocabulary string, 16 s and ~700 MB for Gemma
3's 262144 tokens; transformers' AutoConfig / AutoTokenizer take that same path for these
architectures, and its lean reader (integrations/gguf/reader.py) rejects Q5_0. What is
reused: transformers' config mapping (integrations.ggml) and GGUF tokenizer converter,
llama.cpp's tensor names (gguf's TensorNameMap) and block sizes (GGML_QUANT_SIZES); all
imported only when a file is loaded.
"""
from __future__ import annotations

import logging
import math
import mmap
import os

import torch
from torch import nn

from zenith.quant.formats import GGML_FORMATS, get_format
from zenith.quant.modules import QEmbedding, QLinear, in_large_pages

log = logging.getLogger("zenith")

_FLOAT_TYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def _gemma_fix(name, t, config):
    """llama.cpp stores Gemma's RMSNorm weights as w + 1 (its norm multiplies by w;
    transformers' by 1 + w): undo it."""
    return t - 1 if name.endswith("norm.weight") and t.dtype.is_floating_point else t


def _llama_fix(name, t, config):
    """llama.cpp's converter permutes the rows of Llama's q and k projections (the rotary
    halves interleaved per head): put them back. Rows of a block layout are independent,
    so the same permutation applies to the bytes (a copy of the quantized rows)."""
    if ".attn_q." in name:
        heads = config.num_attention_heads
    elif ".attn_k." in name:
        heads = config.num_key_value_heads
    else:
        return t
    n = t.shape[0]
    return t[torch.arange(n).reshape(heads, n // heads // 2, 2).transpose(1, 2).reshape(n)]


# GGUF architecture -> (transformers model_type, the fix-up each of its tensors goes through)
ARCHITECTURES = {"llama": ("llama", _llama_fix), "gemma3": ("gemma3_text", _gemma_fix)}


def _fail(path, why):
    raise ValueError(f"zenith.load_gguf({os.fspath(path)!r}): {why}")


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read_header(buf):
    """(metadata, [(name, torch-order shape, ggml type, offset)], data start) of a GGUF
    file's bytes. String arrays (the vocabulary) are skipped and given as their length."""
    import struct

    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return values

    def string():
        nonlocal pos
        (n,) = take("<Q")
        pos += n
        return bytes(buf[pos - n:pos]).decode("utf-8")

    def value(vtype, keep=True):
        nonlocal pos
        if vtype in _SCALARS:
            return take(_SCALARS[vtype])[0]
        if vtype == _STRING:
            return string()
        if vtype == _ARRAY:
            etype, n = take("<IQ")
            if etype == _STRING:
                for _ in range(n):
                    (length,) = take("<Q")
                    pos += length
                return n
            return [value(etype) for _ in range(n)]
        raise ValueError(f"unknown metadata value type {vtype}")

    if bytes(buf[:4]) != b"GGUF":
        raise ValueError(f"not a GGUF file (it starts with {bytes(buf[:4])!r}, not b'GGUF')")
    pos = 4
    version, n_tensors, n_kv = take("<IQQ")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version}; Zenith reads versions 2 and 3")
    metadata = {}
    for _ in range(n_kv):
        key = string()
        metadata[key] = value(take("<I")[0])
    tensors = []
    for _ in range(n_tensors):
        name = string()
        (n_dims,) = take("<I")
        dims = take(f"<{n_dims}Q")
        ggml_type, offset = take("<IQ")
        tensors.append((name, tuple(reversed(dims)), ggml_type, offset))  # ggml lists the fastest dim first
    align = metadata.get("general.alignment", 32)
    return metadata, tensors, (pos + align - 1) // align * align


class _File:
    """The header (metadata, tensor table) and a copy-on-write memory map of the data."""

    def __init__(self, path):
        import numpy as np

        try:
            from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
        except ImportError:
            raise ImportError("zenith.load_gguf needs the gguf package: pip install 'pyzenith[quant]' "
                              "(or gguf==0.19.0)") from None

        self.path = path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"zenith.load_gguf: no such file: {path!r}")
        # "c": copy-on-write, so views are writable (torch wants that) while the pages stay
        # the page cache's until something writes to them (nothing does)
        self._map = np.memmap(path, dtype=np.uint8, mode="c")
        try:
            self.metadata, table, data_start = _read_header(self._map)
        except Exception as e:  # struct.error past the end, bad UTF-8, bad magic or version
            _fail(path, f"not a readable GGUF file ({type(e).__name__}: {e})")
        self.arch = self.metadata.get("general.architecture")
        self.tensors = {}  # name -> (format name or torch float dtype, shape, byte offset, nbytes)
        for name, shape, ggml_type, offset in table:
            try:
                kind = GGMLQuantizationType(ggml_type).name
            except ValueError:
                _fail(path, f"tensor {name} has ggml type {ggml_type}, which no GGUF version defines (corrupt file?)")
            block_elems, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
            nbytes = math.prod(shape) // block_elems * block_bytes
            if kind in GGML_FORMATS:
                kind = GGML_FORMATS[kind]
            elif kind in _FLOAT_TYPES:
                kind = _FLOAT_TYPES[kind]
            else:
                _fail(path, f"tensor {name} is {kind}, which Zenith does not run; GGUF types it runs: "
                      + ", ".join([*_FLOAT_TYPES, *GGML_FORMATS]))
            start = data_start + offset
            if start + nbytes > self._map.size:
                _fail(path, f"truncated or corrupt: tensor {name} ends at byte {start + nbytes}, "
                      f"the file has {self._map.size}")
            self.tensors[name] = (kind, shape, start, nbytes)

    def in_large_pages(self, t):
        """A block tensor of 2 MiB or more copied into memory asked for 2 MiB pages
        (zenith.quant.modules.in_large_pages: decode reads every weight once per token, and
        the file's 4 KiB pages cost a TLB miss each: Gemma 3 270M, whose 170 MiB tied
        embedding is the only such tensor, 1.18x the tokens/s on an Intel Xeon); else t.
        Where t lies in the map, the map's whole pages under it are dropped from this
        process as the copy passes them (they are the file's, re-read if touched again;
        nothing writes to them), so the process holds the weight once, not twice (the
        kernel's page cache keeps the file's pages until it needs the memory)."""
        start = t.data_ptr() - self._map.ctypes.data
        raw = getattr(self._map, "_mmap", None)  # numpy's mmap.mmap under the memmap
        if raw is None or not 0 <= start <= self._map.size - t.numel() * t.element_size():
            return in_large_pages(t)  # not a view of the map (a fix-up made a copy)
        page = mmap.PAGESIZE
        done = [-(-start // page) * page]  # map offset up to which pages are dropped

        def drop(copied):
            end = (start + copied) // page * page
            if end > done[0]:
                raw.madvise(mmap.MADV_DONTNEED, done[0], end - done[0])
                done[0] = end

        return in_large_pages(t, drop)

    def tensor(self, name):
        """The tensor over the mapped file: uint8 [N, row_bytes] for a block format, else
        the float values (no copy either way)."""
        kind, shape, start, nbytes = self.tensors[name]
        raw = torch.from_numpy(self._map[start:start + nbytes])
        if isinstance(kind, str):
            return raw.reshape(-1, nbytes // max(1, math.prod(shape[:-1])))
        return raw.view(kind).reshape(shape)


def _config(f):
    """The transformers config the file's metadata describes, as transformers' GGUF loader
    builds it (integrations.ggml.GGUF_CONFIG_MAPPING), without reading the vocabulary."""
    import transformers
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING, GGUF_CONFIG_MAPPING

    cfg = {}
    for key, value in f.metadata.items():  # prefixes: general, tokenizer (special ids), the architecture
        prefix, _, rest = key.partition(".")
        target = GGUF_CONFIG_MAPPING.get(prefix, {}).get(rest)
        if target is not None and target != -1:
            cfg[target] = value
    cfg["model_type"] = ARCHITECTURES[f.arch][0]
    cfg["tie_word_embeddings"] = "output.weight" not in f.tensors
    for k, v in GGUF_CONFIG_DEFAULTS_MAPPING.get(f.arch, {}).items():
        cfg.setdefault(k, v)
    if "vocab_size" not in cfg and isinstance(f.metadata.get("tokenizer.ggml.tokens"), int):
        cfg["vocab_size"] = f.metadata["tokenizer.ggml.tokens"]  # the reader gives a string array's length
    return transformers.AutoConfig.for_model(**cfg)


def _tokenizer(f, config):
    """The tokenizer class AutoTokenizer picks for this model type, built from the file by
    transformers' GGUF tokenizer converter."""
    import transformers
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES, tokenizer_class_from_name

    name = TOKENIZER_MAPPING_NAMES.get(config.model_type)
    cls = tokenizer_class_from_name(name) if name else transformers.TokenizersBackend
    return cls.from_pretrained(os.path.dirname(os.path.abspath(f.path)), gguf_file=os.path.basename(f.path))


def _module_names(model, arch, n_layers):
    """GGUF tensor base name ("blk.0.attn_q") -> the model's module name."""
    import gguf

    arch_id = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    names = gguf.get_tensor_name_map(arch_id, n_layers)
    out = {}
    for module_name, _ in model.named_modules():
        g = names.get_name(module_name) if module_name else None
        if g is not None:
            out.setdefault(g, module_name)
    return out


def _set(model, module_name, new):
    parent, _, attr = module_name.rpartition(".")
    setattr(model.get_submodule(parent), attr, new)


def _param(t):
    return nn.Parameter(t if t.dtype == torch.float32 else t.float(), requires_grad=False)


def load_gguf(path):
    """Loads a GGUF file (architectures: gemma3, llama) and returns (model, tokenizer):
    a transformers causal LM in eval mode whose linear layers are QLinear over the file's
    blocks (formats q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k; memory-mapped, never
    expanded to fp32), its token embedding a QEmbedding sharing its bytes with a tied LM
    head, and the tokenizer the file describes. Compile it as any model:
    `model.forward = torch.compile(model.forward, backend="zenith")`.
    Raises ValueError for an architecture or tensor type Zenith does not run and for a
    damaged file, naming what it found."""
    import transformers

    f = _File(path)
    if f.arch not in ARCHITECTURES:
        _fail(path, f"architecture {f.arch!r} is not supported; supported: {', '.join(ARCHITECTURES)}")
    try:  # transformers reads the file again for these, with errors of its own on damaged metadata
        config = _config(f)
        tokenizer = _tokenizer(f, config)
    except (ImportError, FileNotFoundError):
        raise
    except Exception as e:
        if isinstance(e, ValueError) and str(e).startswith("zenith.load_gguf("):
            raise
        first = str(e).splitlines()[0] if str(e) else ""
        _fail(path, f"its config or tokenizer metadata is not readable ({type(e).__name__}: {first})")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    modules = _module_names(model, f.arch, config.num_hidden_layers)

    # the file's tensors per module: {module name: {"weight": gguf name, "bias": ...}}
    per_module = {}
    for name in f.tensors:
        base, _, attr = name.rpartition(".")
        if base not in modules:
            log.info("zenith.load_gguf: tensor %s has no place in %s; ignored", name, type(model).__name__)
            continue
        per_module.setdefault(modules[base], {})[attr] = name
    for module_name, tensors in per_module.items():
        module = model.get_submodule(module_name)
        new = _fill(f, config, module_name, module, tensors)
        if new is not None:
            _set(model, module_name, new)
    _tie_lm_head(model, config)
    _materialize_buffers(model, path)
    model.eval()
    model.requires_grad_(False)
    return model, tokenizer


def _fill(f, config, module_name, module, tensors):
    """Puts the file's tensors into one module: a replacement module (QLinear,
    QEmbedding) or None when the parameters were set in place."""
    values = {}
    fix = ARCHITECTURES[f.arch][1]
    for attr, name in tensors.items():
        kind = f.tensors[name][0]
        t = f.tensor(name)
        want = getattr(module, attr, None)
        if not isinstance(want, torch.Tensor):
            _fail(f.path, f"tensor {name} maps to {module_name}.{attr}, which {type(module).__name__} does not have")
        if isinstance(kind, str):  # blocks
            if attr != "weight" or not isinstance(module, (nn.Linear, nn.Embedding)):
                _fail(f.path, f"tensor {name} is {kind} but {module_name}.{attr} is not a linear or embedding weight")
            k = get_format(kind).k_of(t.shape[1])
            if (t.shape[0], k) != tuple(want.shape):
                _fail(f.path, f"tensor {name} holds [{t.shape[0]}, {k}], {module_name}.weight is {list(want.shape)}")
        elif tuple(t.shape) != tuple(want.shape):
            _fail(f.path, f"tensor {name} is {list(t.shape)}, {module_name}.{attr} is {list(want.shape)}")
        values[attr] = (kind, fix(name, t, config))
    kind, w = values.get("weight", (None, None))
    if isinstance(kind, str):
        w = f.in_large_pages(w)
    bias = values["bias"][1].float() if "bias" in values else None
    if isinstance(kind, str) and isinstance(module, nn.Embedding):
        return QEmbedding(w, kind, QEmbedding.wrapper_scale(module))
    if isinstance(kind, str):
        if module.bias is not None and bias is None:
            _fail(f.path, f"{module_name} has a bias the file does not hold")
        return QLinear(w, kind, bias)
    for attr, (_, t) in values.items():
        module._parameters[attr] = _param(t)
    return None


def _tie_lm_head(model, config):
    """A tied LM head reads the token embedding's weight: the same bytes for a QEmbedding."""
    if not getattr(config, "tie_word_embeddings", False):
        return
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    if head is None:
        return
    if isinstance(emb, QEmbedding):  # the head reads the table itself, never the scaled lookup
        model.set_output_embeddings(QLinear(emb.weight, emb.format))
    else:
        head.weight = emb.weight


def _materialize_buffers(model, path, fail=_fail):
    """Every parameter must have come from the file (else an error naming it). Buffers the
    model computes rather than loads (rotary frequencies) were made on the meta device:
    make them on the CPU with the model's own initializer, which is only run on modules
    that hold no parameters (it would re-initialize those)."""
    missing = [n for n, p in model.named_parameters() if p.is_meta]
    if missing:
        fail(path, f"the file holds no tensor for {', '.join(missing[:8])}" + (" ..." if len(missing) > 8 else ""))
    for name, module in model.named_modules():
        meta = [k for k, b in module._buffers.items() if b is not None and b.is_meta]
        if not meta:
            continue
        if next(module.parameters(recurse=False), None) is not None:
            fail(path, f"{name} ({type(module).__name__}) has buffers the file does not hold: {', '.join(meta)}")
        if not hasattr(model, "_init_weights"):  # not a transformers model: nothing knows how to make them
            fail(path, f"{name} ({type(module).__name__}) has buffers on the meta device that the file does not "
                       f"hold ({', '.join(meta)}); build the model on the CPU")
        for k in meta:
            module._buffers[k] = torch.empty_like(module._buffers[k], device="cpu")
        model._init_weights(module)
    left = [n for n, b in model.named_buffers() if b.is_meta]
    if left:
        fail(path, f"no values for the buffers {', '.join(left[:8])}")
