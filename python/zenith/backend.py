"""The torch.compile backend: Dynamo graph -> ATen graph -> Zenith.

AOTAutograd turns Dynamo's graph into ATen graphs (an inference graph, or a
forward/backward pair when gradients are needed); each goes through
partition.CompiledGraph, so the same path carries inference and training.
Inference graphs with static shapes that neither mutate nor alias their inputs
are traced to ATen directly (make_fx of the functionalized graph on Dynamo's fake
tensors), which gives the same graph in about half of AOTAutograd's time
(BERT-base: 0.3 s against 0.7 s).
"""
from __future__ import annotations

import contextlib
import functools
import logging

import torch
from torch._dynamo.backends.common import aot_autograd

from zenith.importer import decomposition_table
from zenith.options import resolve
from zenith.partition import CompiledGraph

log = logging.getLogger("zenith")

_REPORT_SINKS = []  # lists that collect the reports of graphs compiled while they are registered


@contextlib.contextmanager
def collect_reports():
    """Yields a list that receives the GraphReport of every graph Zenith compiles
    inside the block (explain, the benchmark and tests use it)."""
    sink = []
    _REPORT_SINKS.append(sink)
    try:
        yield sink
    finally:
        _REPORT_SINKS.remove(sink)


def _compile_fx(gm, example_inputs, options, static_inputs=None, aten_trace="AOTAutograd"):
    compiled = CompiledGraph(gm, options, static_inputs=static_inputs)
    compiled.report.aten_trace = aten_trace
    if log.isEnabledFor(logging.DEBUG):  # TORCH_LOGS=+zenith
        n = len(compiled.report.executables)
        for i, exe in enumerate(compiled.report.executables):
            log.debug("zenith: segment %d/%d (%s) after passes:\n%s", i + 1, n, aten_trace, exe.graph_text)
    for sink in _REPORT_SINKS:
        sink.append(compiled.report)
    return compiled


# Graph calls that change global state the traced graph must honour; AOTAutograd
# handles them.
_STATEFUL_TARGETS = (torch._C._set_grad_enabled, torch.amp.autocast_mode._enter_autocast,
                     torch.amp.autocast_mode._exit_autocast)


def aten_trace(gm, fakes):
    """gm traced to ATen with Zenith's decompositions: make_fx of the functionalized graph
    on fake tensors. Functionalized, so in-place ops on intermediates (ReLU(inplace=True)
    in most torchvision CNNs) become their functional forms; a mutated input keeps a copy_
    back into it (see writes())."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(torch.func.functionalize(gm), decomposition_table=decomposition_table(),
                   tracing_mode="fake")(*fakes)


def writes(g):
    """The mutating ops left in a functionalized ATen graph (writes into its inputs)."""
    return sorted({str(n.target) for n in g.graph.nodes if n.op == "call_function"
                   and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable})


def _direct_inference(gm, example_inputs, options):
    """Dynamo's graph traced straight to ATen (make_fx with Zenith's decompositions
    on the fake tensors Dynamo recorded), when nothing needs AOTAutograd's
    machinery: no gradients (checked by the caller), every input a tensor of static
    shape, no parameters baked into the module, no grad-mode or autocast switches,
    and the traced graph (functionalized: in-place ops on intermediates are fine)
    neither mutates an input nor returns a view of an input or of another output.
    Returns the compiled callable, or None (then AOTAutograd)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    fakes = [p.meta.get("example_value") for p in placeholders]
    if (len(fakes) != len(example_inputs) or not all(isinstance(x, torch.Tensor) for x in example_inputs)
            or not all(isinstance(f, torch.Tensor) for f in fakes)
            or any(isinstance(d, torch.SymInt) for f in fakes for d in (*f.shape, *f.stride()))
            or next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None
            or any(n.op == "call_function" and n.target in _STATEFUL_TARGETS for n in gm.graph.nodes)):
        return None
    try:
        g = aten_trace(gm, fakes)
    except Exception as e:  # anything make_fx cannot take, AOTAutograd may
        log.debug("zenith: direct ATen trace failed (%s: %s); using AOTAutograd", type(e).__name__, e)
        return None
    if writes(g):  # a mutated input: AOTAutograd
        return None
    nodes = list(g.graph.nodes)
    inputs = {StorageWeakRef(n.meta["val"].untyped_storage()) for n in nodes
              if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)}
    outs = [o for o in torch.utils._pytree.tree_leaves(next(n for n in nodes if n.op == "output").args[0])
            if isinstance(o, torch.fx.Node) and isinstance(o.meta.get("val"), torch.Tensor)]
    storages = [StorageWeakRef(o.meta["val"].untyped_storage()) for o in outs if o.op != "placeholder"]
    if any(s in inputs for s in storages) or len(set(storages)) != len(storages):
        return None
    static = [i for i, p in enumerate(placeholders)
              if p.meta.get("tensor_dict", {}).get("_dynamo_static_input_type")]
    compiled = _compile_fx(g, fakes, options, static_inputs=static, aten_trace="direct")
    call = compiled._call  # the generated call itself, one frame less per call

    def run(*args):
        return call(list(args))

    return run


def _compile(gm, example_inputs, opts):
    """Dynamo's graph compiled with resolved Options."""
    options = opts.compiler_options()
    # Inference graphs (no gradients needed) may treat parameters as constants.
    inference_options = {**options, "inference": True}
    # AOTAutograd's own test for an inference graph: no input needs a gradient.
    grad = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)
    if not grad and not opts.aot_inference:
        fn = _direct_inference(gm, example_inputs, inference_options)
        if fn is not None:
            return fn
    compiler = functools.partial(_compile_fx, options=options)
    inference = functools.partial(_compile_fx, options=inference_options)
    aot = aot_autograd(fw_compiler=compiler, bw_compiler=compiler, inference_compiler=inference,
                       decompositions=decomposition_table)
    return aot(gm, example_inputs)


_WHERE = 'torch.compile(backend="zenith")'


def make_backend(**options):
    """A backend callable with Zenith options (zenith.options.Options: passes=True,
    verify=False, fallback=True, pack_weights=True, aot_inference=False). Given to
    torch.compile, the `mode=` and `options=` it passes apply on top of these."""
    base = resolve(options=options, where="zenith.make_backend")

    def backend(gm, example_inputs, *, mode=None, options=None):
        opts = base if mode is None and options is None else resolve(mode, options, base=base, where=_WHERE)
        return _compile(gm, example_inputs, opts)

    return backend


def zenith_backend(gm: torch.fx.GraphModule, example_inputs, *, mode=None, options=None):
    """The backend registered as "zenith": `torch.compile(model, backend="zenith",
    mode=..., options={...})` passes mode= and options= here (see zenith.options)."""
    return _compile(gm, example_inputs, resolve(mode, options, where=_WHERE))
