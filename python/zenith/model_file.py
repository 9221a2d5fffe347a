"""zenith.export / zenith.load: a model as one file that the C++ runtime runs without Python.

    zenith.export(model, (x,), "model.zenith")   # captured, checked against eager, written
    m = zenith.load("model.zenith")              # the C++ loader, from Python
    y = m(x)
    $ zenith-run model.zenith --input in.safetensors --output out.safetensors   # no Python

The file is a safetensors file (csrc/zenith/model_file.h has the layout): the weights as
tensors, the graph as Zenith IR text in its metadata, as imported, before the passes: the
loader runs them for the CPU it runs on. The model is captured as zenith.freeze captures it
(torch.export, non-strict, inference), with the example inputs' shapes: one input signature
per file. Every op must run natively (the C++ runtime has no PyTorch to fall back to): an
op without a Zenith kernel is an error naming it. By default the written file is loaded
and run on the example inputs and its outputs checked against eager before export returns.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from torch.export.graph_signature import InputKind
from torch.utils import _pytree as pytree

from zenith import _C
from zenith.importer import CONVERTERS, Lowering
from zenith.partition import partition

# zenith-run, installed beside the extension (CMakeLists.txt).
RUN_BINARY = Path(__file__).parent / "bin" / "zenith-run"

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i64": torch.int64,
           "i32": torch.int32, "b8": torch.bool, "u8": torch.uint8}


def _ident(name, taken):
    """`name` as an IR value name (letters, digits, '_' and '.'), unique among `taken`."""
    base = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "v"
    out, k = base, 1
    while out in taken:
        out, k = f"{base}_{k}", k + 1
    taken.add(out)
    return out


def _close(out, ref):
    """None if `out` matches eager's `ref`, else what differs. Floats within 1e-3 of the
    reference's largest magnitude (at least 1): what Winograd and reordered sums may move."""
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return f"{out.dtype}{list(out.shape)} where eager gives {ref.dtype}{list(ref.shape)}"
    if not ref.is_floating_point():
        return None if torch.equal(out, ref) else "values differ"
    o, r = out.float(), ref.float()
    if not torch.equal(o.isnan(), r.isnan()):
        return "NaN where eager has none, or none where it has"
    err = (o - r).nan_to_num(0.0).abs().max().item() if r.numel() else 0.0
    bound = 1e-3 * max(1.0, r.nan_to_num(0.0).abs().max().item() if r.numel() else 0.0)
    return None if err <= bound else f"max abs error {err:.3g} > {bound:.3g}"


def export(model, args, path, *, kwargs=None, check=True):
    """Writes `model` (an nn.Module in eval mode) called on `args` (a tuple; `kwargs`
    optional) to `path` as a Zenith model file, for the example inputs' shapes and dtypes.
    The file's inputs are the call's tensors in order (positional, then keyword);
    non-tensor arguments are fixed at their example values. With check=True (default) the
    file is loaded and run on the example inputs, and an output outside 1e-3 of eager's
    (relative to its largest magnitude) removes the file and raises. Returns the
    LoadedModel (check=True) or None."""
    from zenith.freeze import _check_eval, capture

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"zenith.export: takes an nn.Module, got {type(model).__name__}")
    _check_eval(model)
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    kwargs = dict(kwargs or {})
    # Dense examples: the file's inputs are dense, row-major tensors of these shapes.
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.contiguous(), (args, kwargs))
    for t in pytree.tree_leaves((args, kwargs)):
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            raise RuntimeError(f"zenith.export: runs on CPU; an input is on {t.device.type}")
    ep, gm, bound = capture(model, args, kwargs, "zenith.export")
    gm.graph.eliminate_dead_code()
    nodes = list(gm.graph.nodes)
    part = partition(nodes, {"inference": True})
    if part.fallback_reason:
        ops = {}
        for n, why in part.fallback_reason.items():
            ops.setdefault(str(n.target), why)
        listed = "; ".join(f"{op} ({why})" for op, why in sorted(ops.items()))
        raise RuntimeError(f"zenith.export: the C++ runtime runs native graphs only, and these ops have no "
                           f"Zenith kernel: {listed}")
    torch_side = [x for kind, x in part.steps if kind == "torch"]
    if torch_side:  # scalar nodes an output needs: PyTorch would compute them per call
        raise RuntimeError(f"zenith.export: the graph's outputs need scalars computed in Python "
                           f"({', '.join(str(n.target) for n in torch_side)}); model files hold static graphs")

    placeholders = [n for n in nodes if n.op == "placeholder"]
    specs = ep.graph_signature.input_specs
    L = Lowering(gm)
    taken = set()
    # The model's tensor inputs first, in call order (the graph would list them by first use).
    for p, spec in zip(placeholders[len(bound):], specs[len(bound):]):
        if spec.kind == InputKind.USER_INPUT and isinstance(p.meta.get("val"), torch.Tensor):
            L.val(p)
            L.g.set_name(L.env[p], _ident(spec.arg.name, taken))
    for n in nodes:  # the scalar nodes no tensor reads are left out, as segments leave them
        if n.op == "call_function" and n not in part.sym_nodes:
            L.env[n] = CONVERTERS[n.target](L, n)
    outs = []
    for leaf in pytree.tree_leaves(next(n for n in nodes if n.op == "output").args[0]):
        if not (isinstance(leaf, torch.fx.Node) and isinstance(leaf.meta.get("val"), torch.Tensor)):
            raise RuntimeError(f"zenith.export: an output is not a tensor the graph computes ({leaf!r})")
        outs.append(L.val(leaf))
    L.g.set_outputs(outs)

    weights = {}
    index = {p: i for i, p in enumerate(placeholders)}
    for k, (p, perm) in enumerate(zip(L.inputs, L.input_perms)):  # L.inputs[k] is graph input k
        i = index[p]
        if i >= len(bound):
            if perm is not None:
                raise RuntimeError(f"zenith.export: input {specs[i].arg.name} is read as a permuted view")
            continue
        name = _ident(specs[i].target, taken)
        L.g.set_name(L.g.inputs[k], name)
        # The graph reads a permuted weight in its physical order (Lowering.val).
        weights[name] = (bound[i] if perm is None else bound[i].permute(perm)).contiguous()
    from zenith import __version__

    meta = {"zenith.version": __version__, "zenith.torch": torch.__version__,
            "zenith.out_spec": pytree.treespec_dumps(ep.call_spec.out_spec)}
    path = os.fspath(path)
    _C.save_model(L.g, path, weights, meta)
    if not check:
        return None
    loaded = load(path)
    user = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    with torch.no_grad():
        ref = pytree.tree_leaves(model(*args, **kwargs))
        got = pytree.tree_leaves(loaded(*user))
    for k, (o, r) in enumerate(zip(got, ref)):
        why = _close(o, r) if isinstance(r, torch.Tensor) else None
        if why:
            os.remove(path)
            raise RuntimeError(f"zenith.export: output {k} of the written file does not match eager ({why}); "
                               "the file is removed")
    return loaded


class LoadedModel:
    """A model file run by the C++ runtime (what zenith.load returns). Call it with the
    model's input tensors in order (`inputs` lists them); outputs come in the exported
    model's structure."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._model = _C.Model(self.path)
        self.inputs = [(name, _DTYPES[dt], tuple(shape)) for name, dt, shape in self._model.inputs]
        self.metadata = dict(self._model.metadata)
        spec = self.metadata.get("zenith.out_spec")
        self._out_spec = pytree.treespec_loads(spec) if spec else None

    @property
    def graph_text(self):
        """The graph after this machine's passes."""
        return self._model.graph_text

    def __call__(self, *tensors):
        if len(tensors) != len(self.inputs):
            raise TypeError(f"zenith.load: the model takes {len(self.inputs)} tensors "
                            f"({', '.join(n for n, _, _ in self.inputs)}), got {len(tensors)}")
        for t, (name, dtype, shape) in zip(tensors, self.inputs):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"zenith.load: input {name} must be a tensor, got {type(t).__name__}")
            if t.device.type != "cpu":
                raise RuntimeError(f"zenith.load: runs on CPU; input {name} is on {t.device.type}")
            if t.dtype != dtype or tuple(t.shape) != shape:
                raise RuntimeError(f"zenith.load: input {name} is {t.dtype}{list(t.shape)}, the model takes "
                                   f"{dtype}{list(shape)}")
        outs = self._model.run([t.detach().contiguous() for t in tensors])
        if self._out_spec is None or self._out_spec.num_leaves != len(outs):
            return outs[0] if len(outs) == 1 else tuple(outs)
        return pytree.tree_unflatten(list(outs), self._out_spec)


def load(path):
    """A model file (zenith.export) loaded by the C++ runtime; see LoadedModel."""
    return LoadedModel(path)
