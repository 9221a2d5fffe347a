"""zenith.export / zenith.load: a model as one file that the C++ runtime runs without Python.

    zenith.export(model, (x,), "model.zenith")   # captured, checked against eager, written
    m = zenith.load("model.zenith")              # the C++ loader, from Python
    y = m(x)
    $ zenith-run model.zenith --input in.safetensors --output out.safetensors   # no Python

The file is a safetensors file (csrc/zenith/model_file.h has the layout): the weights as
tensors, the graph as Zenith IR text in its metadata, as imported, before the passes: the
loader runs them for the CPU it runs on. The model is captured as zenith.freeze captures it
(torch.export, non-strict, inference), with the example inputs' shapes, or with the
dims torch.export's `dynamic_shapes` makes symbolic: one file for every batch or sequence
length in their ranges. Every op must run natively (the C++ runtime has no PyTorch to
fall back to): an op without a Zenith kernel is an error naming it. By default the written
file is loaded and run on the example inputs and its outputs checked against eager before
export returns.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from torch.export.graph_signature import InputKind
from torch.utils import _pytree as pytree

from zenith import _C
from zenith.importer import CONVERTERS, DTYPES, Lowering
from zenith.partition import partition

# zenith-run, installed beside the extension (CMakeLists.txt).
RUN_BINARY = Path(__file__).parent / "bin" / "zenith-run"

_TORCH_DTYPES = {name: dtype for dtype, name in DTYPES.items()}  # the IR dtype names back to torch's


def _ident(name, taken):
    """`name` as an IR value name (letters, digits, '_' and '.'), unique among `taken`,
    and never of the form v<digits> (the names the IR gives unnamed values)."""
    base = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "input"
    if re.fullmatch(r"v\d+", base):
        base = "_" + base
    out, k = base, 1
    while out in taken:
        out, k = f"{base}_{k}", k + 1
    taken.add(out)
    return out


def _close(out, ref, rtol, atol):
    """None if `out` matches eager's `ref`, else what differs. Integers and booleans exactly;
    floats element by element, |out - ref| <= atol + rtol |ref| over the finite values (as
    export's docstring gives the defaults: what Winograd and reordered sums move), and NaN
    and infinities where eager has them."""
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return f"{out.dtype}{list(out.shape)} where eager gives {ref.dtype}{list(ref.shape)}"
    if not ref.is_floating_point():
        return None if torch.equal(out, ref) else "values differ"
    o, r = out.double(), ref.double()
    finite = r.isfinite()
    if not torch.equal(o.isnan(), r.isnan()) or not torch.equal(o[~finite & ~r.isnan()], r[~finite & ~r.isnan()]):
        return "NaN or infinities where eager has none, or none where it has them"
    if not finite.any():
        return None
    half = ref.dtype in (torch.float16, torch.bfloat16)  # one rounding: ~4e-3 for bfloat16
    rtol = (1e-2 if half else 1e-3) if rtol is None else rtol
    if atol is None:
        atol = (1e-2 if half else 1e-3) * r[finite].abs().max().item()
    excess = (o[finite] - r[finite]).abs() - (atol + rtol * r[finite].abs())
    if excess.max().item() > 0:
        k = int(excess.argmax())
        return (f"|{o[finite][k].item():.6g} - {r[finite][k].item():.6g}| exceeds atol {atol:.3g} + "
                f"rtol {rtol:g} x |eager|")
    return None


def _out_spec_text(spec):
    """The output tree as text (torch's treespec JSON), or None for a tree whose node types
    pytree cannot serialize (load then returns the outputs as a tuple)."""
    try:
        return pytree.treespec_dumps(spec)
    except Exception:  # noqa: BLE001  (an unregistered or unserializable node type)
        return None


def _out_spec(text):
    """The output tree from _out_spec_text's text. A node type pytree knows only once its
    module is imported (transformers' ModelOutputs register on import) is imported by the
    module its serialized name gives; None if that fails too."""
    import importlib
    import json

    try:
        return pytree.treespec_loads(text)
    except Exception:  # noqa: BLE001  (tried again below after importing the types' modules)
        pass

    def types(node):
        if isinstance(node, dict):
            if isinstance(node.get("type"), str):
                yield node["type"]
            for v in node.values():
                yield from types(v)
        elif isinstance(node, list):
            for v in node:
                yield from types(v)

    for name in set(types(json.loads(text))):
        parts = name.split(".")
        for k in range(len(parts) - 1, 0, -1):
            try:
                importlib.import_module(".".join(parts[:k]))
                break
            except Exception:  # noqa: BLE001  (a prefix that is no module)
                continue
    try:
        return pytree.treespec_loads(text)
    except Exception:  # noqa: BLE001
        return None


def _finite(bound):
    """A range bound as an int, or None where torch's range has none (int_oo, whose
    is_finite is True, or sympy's oo)."""
    import sympy
    from torch.utils._sympy.numbers import int_oo

    return None if bound in (int_oo, -int_oo, sympy.oo, -sympy.oo) else int(bound)


def _symbol_ranges(ep, placeholders, names):
    """The symbols that size the model's inputs, as the file's zenith.symbols JSON: each
    symbol's range from torch.export (max null: unbounded). An input dim sized by an
    expression of symbols (a derived Dim) is refused: each symbolic dim of a file's input
    is one symbol, which the runtime binds from it."""
    import json

    ranges = {}
    for p, name in zip(placeholders, names):
        for d, size in enumerate(p.meta["val"].shape):
            if not isinstance(size, torch.SymInt):
                continue
            expr = size.node.expr
            if not expr.is_symbol:
                raise RuntimeError(f"zenith.export: input {name} dim {d} is sized by an expression ({expr}); a model "
                                   "file's symbolic dims are one symbol each (give that dim its own Dim)")
            vr = ep.range_constraints.get(expr)
            lo = _finite(vr.lower) if vr is not None else None
            hi = _finite(vr.upper) if vr is not None else None
            ranges[str(expr)] = {"min": max(lo or 0, 0), "max": hi}
    return json.dumps(ranges, sort_keys=True)


def export(model, args, path, *, kwargs=None, dynamic_shapes=None, metadata=None, check=True, rtol=None, atol=None,
           _notes=None, _compare=None):
    """Writes `model` (an nn.Module in eval mode) called on `args` (a tuple; `kwargs`
    optional) to `path` as a Zenith model file, for the example inputs' shapes and dtypes,
    except the dims `dynamic_shapes` makes symbolic (torch.export's argument, e.g.
    `({0: torch.export.Dim("batch", max=64)},)`): the file runs any size in their ranges.
    The file's inputs are the call's tensors in order (positional, then keyword, in the
    order given); non-tensor arguments are fixed at their example values. With check=True
    (default) the file is loaded and run on the example inputs and compared with eager,
    element by element: |zenith - eager| <= atol + rtol |eager|; by default rtol 1e-3 and atol
    1e-3 of the output's largest finite magnitude (1e-2 for float16 / bfloat16 outputs, one
    rounding of theirs); integers exactly, NaN and infinities in place. A
    mismatch, or any failure to load or run the file, removes it and raises (the check runs
    the example inputs' sizes only). `metadata` (str -> str, keys not starting with "zenith.")
    is stored in the file for the program that runs it (LoadedModel.metadata, C++
    Model::metadata()). Returns the LoadedModel (check=True) or None."""
    from zenith.freeze import _check_eval, capture

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"zenith.export: takes an nn.Module, got {type(model).__name__}")
    _check_eval(model)
    metadata = dict(metadata or {})
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"zenith.export: metadata maps str to str, got {k!r}: {type(v).__name__}")
        if k.startswith("zenith."):
            raise ValueError(f"zenith.export: metadata key {k!r}: keys starting with 'zenith.' are Zenith's own")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    kwargs = dict(kwargs or {})
    # Dense examples: the file's inputs are dense, row-major tensors of these shapes.
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.contiguous(), (args, kwargs))
    for t in pytree.tree_leaves((args, kwargs)):
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            raise RuntimeError(f"zenith.export: runs on CPU; an input is on {t.device.type}")
    ep, gm, bound = capture(model, args, kwargs, "zenith.export", dynamic_shapes=dynamic_shapes)
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
                           f"({', '.join(str(n.target) for n in torch_side)}); a model file holds tensor graphs only")

    placeholders = [n for n in nodes if n.op == "placeholder"]
    specs = ep.graph_signature.input_specs
    L = Lowering(gm)
    taken = set()
    # The model's tensor inputs first, in call order (the graph would list them by first use).
    user_inputs, user_names = [], []
    for p, spec in zip(placeholders[len(bound):], specs[len(bound):]):
        if spec.kind == InputKind.USER_INPUT and isinstance(p.meta.get("val"), torch.Tensor):
            L.val(p)
            user_inputs.append(p)
            user_names.append(_ident(spec.arg.name, taken))
            L.g.set_name(L.env[p], user_names[-1])
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

    meta = {**metadata, **(_notes or {}), "zenith.version": __version__, "zenith.torch": torch.__version__,
            "zenith.symbols": _symbol_ranges(ep, user_inputs, user_names)}
    spec = _out_spec_text(ep.call_spec.out_spec)
    if spec is not None:
        meta["zenith.out_spec"] = spec
    path = os.fspath(path)
    _C.save_model(L.g, path, weights, meta)
    if not check:
        return None
    try:
        loaded = load(path)
        user = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        with torch.no_grad():
            ref = [t for t in pytree.tree_leaves(model(*args, **kwargs)) if isinstance(t, torch.Tensor)]
            got = pytree.tree_leaves(loaded(*user))
        if len(got) != len(ref):
            raise RuntimeError(f"zenith.export: the written file gives {len(got)} outputs, eager {len(ref)}; "
                               "the file is removed")
        for k, (o, r) in enumerate(zip(got, ref)):
            why = _compare(k, o, r) if _compare else _close(o, r, rtol, atol)
            if why:
                raise RuntimeError(f"zenith.export: output {k} of the written file does not match eager ({why}); "
                                   "the file is removed")
    except BaseException:
        os.remove(path)
        raise
    return loaded


class LoadedModel:
    """A model file run by the C++ runtime (what zenith.load returns). Call it with the
    model's input tensors in order (`inputs` lists them); outputs come in the exported
    model's structure."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._model = _C.Model(self.path)
        # (name, dtype, dims): a symbolic dim is its symbol's name, e.g. ("x", torch.float32, ("s0", 8))
        self.inputs = [(name, _TORCH_DTYPES[dt], tuple(shape)) for name, dt, shape in self._model.inputs]
        # symbol -> (the input dim that binds it, min, max or None)
        self.symbols = dict(self._model.symbols)
        self.metadata = dict(self._model.metadata)
        spec = self.metadata.get("zenith.out_spec")
        self._out_spec = _out_spec(spec) if spec else None  # None: outputs as a tuple

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
            if t.dtype != dtype or t.dim() != len(shape) or any(
                    isinstance(want, int) and got != want for got, want in zip(t.shape, shape)):
                raise RuntimeError(f"zenith.load: input {name} is {t.dtype}{list(t.shape)}, the model takes "
                                   f"{dtype}[{', '.join(map(str, shape))}]")
        _C.set_num_threads(torch.get_num_threads())  # one thread budget shared with PyTorch
        outs = self._model.run([t.detach().contiguous() for t in tensors])
        if self._out_spec is None or self._out_spec.num_leaves != len(outs):
            return outs[0] if len(outs) == 1 else tuple(outs)
        return pytree.tree_unflatten(list(outs), self._out_spec)


def load(path):
    """A model file (zenith.export) loaded by the C++ runtime; see LoadedModel."""
    return LoadedModel(path)
