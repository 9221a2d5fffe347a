"""zenith.freeze: an inference model whose weights are bound once, called without Dynamo.

`torch.compile(model, backend="zenith")` keeps PyTorch's contract: the weights are
inputs of every call, Dynamo guards them and reads each one per call. For a small
model that is most of the cost outside the kernels (MobileNet V2 at batch 1: 0.8 ms
of a 6 ms call, 263 parameters and buffers). `zenith.freeze(model)` takes the
deployment runtimes' contract instead (ONNX Runtime, OpenVINO, torch.jit.freeze,
Inductor's `freezing`): the model is captured whole with torch.export at its first
call, the graph is compiled by the same Zenith pipeline, and a call checks only the
user's inputs before running it.

What stays true of the model, and what does not:
- The parameter and buffer tensors are bound as of that capture. Changing them in
  place (load_state_dict, `with torch.no_grad(): w.mul_(2)`) is seen, as under
  torch.compile (their version counters are watched; weights made under
  torch.inference_mode have none, so they are read in place every call, never kept
  packed). Replacing one
  (`module.weight = nn.Parameter(...)`, `param.data = t`) is not: the frozen model
  keeps reading the tensor it bound (and keeps it alive). Freeze again after that.
- Each new input signature (shapes, strides, dtypes, and any non-tensor argument's value)
  captures and compiles the model again, about as long as a first call, and keeps
  packed copies of the conv weights of its own (pack_weights); up to MAX_SIGNATURES
  are kept, the least recently called dropped past that. For inputs whose shapes vary call to call,
  torch.compile(model, backend="zenith", dynamic=True) compiles one graph for all.
- The whole model must export (torch.export, non-strict) without mutating its
  buffers: a model with any submodule in training mode is refused (call `.eval()`),
  as is one whose capture fails (the error says why, torch.export's error chained to
  it; `torch.compile(model, backend="zenith")` takes graph breaks instead). Python attributes, flags and hooks
  are read at capture, as torch.export reads them. One capture runs at a time per
  process, and the module must not be used eagerly in another thread meanwhile
  (non-strict export swaps its parameters for fake tensors while it traces).
- Calls under torch.autocast are refused (a signature does not include it).
- CPU only: a tensor on another device is a clear error, not a silent fallback.
- Outputs never require grad (inference); ops Zenith cannot run still run in
  PyTorch inside the graph, logged as under torch.compile.
"""
from __future__ import annotations

import collections
import threading
import time

import torch
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils import _pytree as pytree

from zenith.backend import _REPORT_SINKS, aten_trace, writes
from zenith.partition import CompiledGraph

MAX_SIGNATURES = 8

_PYTREE_NODES = pytree.SUPPORTED_NODES  # types pytree flattens (a registered Tensor subclass among them)

_BOUND_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


# torch.export keeps module-level state while it traces and swaps the module's parameters
# for fake tensors: one capture at a time in the process.
_CAPTURE_LOCK = threading.Lock()


def _leaf_key(x):
    if isinstance(x, torch.Tensor):  # strides too: the trace may depend on them (views, memory format)
        return ("tensor", x.dtype, tuple(x.shape), x.stride(), x.device.type)
    try:
        hash(x)
    except TypeError:
        raise TypeError(f"zenith.freeze: an argument of type {type(x).__name__} is neither a tensor nor "
                        "a hashable constant") from None
    return ("value", type(x), x)


def _linear(x, w, b=None):
    """aten.linear as functorch's linear_hack computes it (what aten_trace gives a static
    capture): addmm with the bias for 2-D inputs and contiguous 3-D ones (flattened to
    rows), else matmul (+ bias). The same values as aten.linear at every rank."""
    if b is not None and x.dim() == 2:
        return torch.addmm(b, x, w.t())
    if b is not None and x.dim() == 3 and x.is_contiguous():
        return torch.addmm(b, x.flatten(0, 1), w.t()).view(x.shape[0], x.shape[1], w.shape[0])
    y = torch.matmul(x, w.t())
    return y if b is None else y + b


def capture(model, args, kwargs, who, dynamic_shapes=None):
    """The whole model through torch.export (non-strict) and Zenith's decompositions:
    (the ExportedProgram, its ATen graph, the tensors bound to the graph's first inputs:
    parameters, buffers and constants, as of now). `who` names the caller in errors;
    dynamic_shapes is torch.export's."""
    # Weights made under torch.inference_mode are inference tensors, which export can
    # fakify only inside it (outside: "Setting requires_grad=True on inference tensor").
    inference = any(t.is_inference() for t in (*model.parameters(), *model.buffers()))
    try:
        with torch.inference_mode() if inference else torch.no_grad():
            ep = torch.export.export(model, args, kwargs, strict=False, dynamic_shapes=dynamic_shapes)
            if dynamic_shapes is not None:
                # aten_trace's functionalize runs aten.linear through functorch's linear_hack,
                # which reads the input's sizes as plain ints and so fixes a symbolic batch at
                # the example's. linear decomposed first, as linear_hack computes, keeps it.
                ep = ep.run_decompositions({torch.ops.aten.linear.default: _linear})
    except Exception as e:
        hint = 'torch.compile(model, backend="zenith") takes graph breaks instead'
        if dynamic_shapes is not None and "specialized" in str(e):
            hint = ("with dynamic_shapes, give examples whose symbolic dims are 2 or more (torch.export fixes "
                    "sizes 0 and 1), or see torch.export's message below")
        raise RuntimeError(f"{who}: torch.export could not capture the model ({type(e).__name__}: "
                           f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}); {hint}") from e
    sig = ep.graph_signature
    if any(s.kind != OutputKind.USER_OUTPUT for s in sig.output_specs):  # (a functional export's form)
        raise RuntimeError(f"{who}: the model writes into its buffers or inputs when it runs; "
                           f"{who} takes models that do not")
    bound, user = [], []
    for i, spec in enumerate(sig.input_specs):
        if spec.kind in _BOUND_KINDS:
            t = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            bound.append(t.detach())  # the storage as of now; in-place changes still show
        elif spec.kind == InputKind.USER_INPUT:
            user.append(i)
        else:
            raise RuntimeError(f"{who}: cannot bind the model's input {spec.arg} ({spec.kind.name})")
    if user != list(range(len(bound), len(sig.input_specs))):
        raise RuntimeError(f"{who}: the exported graph does not list its weights before the inputs")
    for t in bound:
        if t.device.type != "cpu":
            raise RuntimeError(f"{who}: runs on CPU; a weight is on {t.device.type} "
                               '(torch.compile(model, backend="zenith") falls back to PyTorch for it)')
    # Zenith's decompositions over export's ATen graph, on its fake tensors; what still
    # writes is a buffer a forward updates, or the caller's tensor.
    with torch.no_grad():  # (an inference tensor must not meet autograd here either)
        gm = aten_trace(ep.graph_module,
                        [n.meta["val"] for n in ep.graph_module.graph.find_nodes(op="placeholder")])
    written = writes(gm)
    if written:
        raise RuntimeError(f"{who}: the model writes into its buffers or inputs ({', '.join(written)}) "
                           f"when it runs; {who} takes models that do not")
    return ep, gm, bound


class _Frozen:
    """One captured signature: the compiled graph and the tensors bound to it."""

    def __init__(self, model, args, kwargs, options):
        t0 = time.perf_counter()
        ep, gm, bound = capture(model, args, kwargs, "zenith.freeze")
        self.graph = CompiledGraph(gm, {**options.compiler_options(), "inference": True},
                                   static_inputs=range(len(bound)))
        self.graph.report.aten_trace = "export"
        self.graph.report.compile_seconds = time.perf_counter() - t0
        for sink in _REPORT_SINKS:  # explain, the benchmark and tests collect them
            sink.append(self.graph.report)
        self.bound = tuple(bound)
        self.out_spec = ep.call_spec.out_spec
        self._one_output = self.out_spec.is_leaf()  # a lone tensor out: no unflatten
        self._call = self.graph.pin(self.bound)  # takes the user's inputs only

    def __call__(self, leaves):
        outs = self._call(list(leaves))
        if self._one_output:
            return outs[0]
        return pytree.tree_unflatten(list(outs), self.out_spec)


def _check_eval(model):
    """A capture of a module in training mode (any submodule: dropout, batch statistics)
    would bake training behaviour into an inference graph."""
    training = [name or "the model" for name, m in model.named_modules() if m.training]
    if training:
        raise RuntimeError(f"zenith.freeze: {training[0]} is in training mode; call model.eval() first "
                           "(a frozen model is for inference)")


class FrozenModel:
    """What zenith.freeze returns: call it as the model."""

    def __init__(self, model, options):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"zenith.freeze: takes an nn.Module (torch.export captures modules), got "
                            f"{type(model).__name__}; torch.compile(fn, backend=\"zenith\") takes functions")
        _check_eval(model)
        self.model = model
        self.options = options
        self._graphs = collections.OrderedDict()  # input signature -> _Frozen
        self._lock = threading.Lock()

    @property
    def reports(self):
        """The GraphReport of each signature captured so far (what ran natively, passes, fallbacks)."""
        with self._lock:
            return [f.graph.report for f in self._graphs.values()]

    def __call__(self, *args, **kwargs):
        # The common call, tensors by position, is keyed without pytree: the key of the
        # general path hashes and compares a TreeSpec in Python, which with the caches
        # cold from the kernels cost 0.13 ms of MobileNet V2's 2.5 ms call (batch 1, Zen
        # 5). Tensors pytree takes as leaves (subclasses too, unless registered as nodes)
        # key as they did: by position count and leaf keys, one signature whatever their
        # class. The two kinds of key never meet: a position count is not a TreeSpec.
        if not kwargs and all(isinstance(a, torch.Tensor) and type(a) not in _PYTREE_NODES for a in args):
            leaves = args
            key = (len(args), tuple(map(_leaf_key, args)))
        else:
            leaves, spec = pytree.tree_flatten((args, kwargs))
            key = (spec, tuple(map(_leaf_key, leaves)))
        if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in leaves):
            raise RuntimeError("zenith.freeze: an input requires grad; a frozen model is for inference "
                               "(use torch.compile(model, backend=\"zenith\") to train)")
        if torch.is_autocast_enabled("cpu"):
            raise RuntimeError("zenith.freeze: a call under torch.autocast is not supported (the graph is "
                               "captured once, without it); convert the model's dtype, or use torch.compile")
        with self._lock:
            frozen = self._graphs.get(key)
            if frozen is not None:
                self._graphs.move_to_end(key)  # least recently used first out
        if frozen is None:
            frozen = self._capture(key, args, kwargs)
        return frozen(leaves)

    def _capture(self, key, args, kwargs):
        for x in pytree.tree_leaves((args, kwargs)):
            if isinstance(x, torch.Tensor) and x.device.type != "cpu":
                raise RuntimeError(f"zenith.freeze: runs on CPU; an input is on {x.device.type} "
                                   '(torch.compile(model, backend="zenith") falls back to PyTorch for it)')
        with _CAPTURE_LOCK:
            frozen = self._graphs.get(key)
            if frozen is None:
                _check_eval(self.model)  # (it may have changed since freeze())
                frozen = _Frozen(self.model, args, kwargs, self.options)
                with self._lock:
                    self._graphs[key] = frozen
                    while len(self._graphs) > MAX_SIGNATURES:
                        self._graphs.popitem(last=False)
        return frozen


def freeze(model, *, mode=None, options=None, **kwargs):
    """An inference callable for `model` with its weights bound once (see this module's
    docstring for the contract), compiled by Zenith at its first call for each input
    signature. Options and modes as for zenith.compile (aot_inference does not apply:
    the graph comes from torch.export)."""
    from zenith.api import _resolve

    return FrozenModel(model, _resolve(mode, options, kwargs, "zenith.freeze"))
