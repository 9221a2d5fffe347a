"""Compiles one ATen fx graph (from AOTAutograd or the direct trace) into a callable.

Nodes Zenith supports are grouped into maximal runs ("segments"), each lowered to a
Zenith graph and run by the C++ runtime. Nodes it does not support run through
PyTorch between the segments, with one log line per op type giving the reason.
Scalar (SymInt) nodes are evaluated by PyTorch only where a fallback op or the
graph's outputs need them; Zenith segments bind symbols from input shapes.

The jobs, one place each: which node runs where (`partition`, here), lowering a
segment (segment.py), the constant weights' bookkeeping (weights.py) and the
generated per-call code (callpath.py). `CompiledGraph` puts them together.
"""
from __future__ import annotations

import logging
import os
import operator
import time
from dataclasses import dataclass, field

import torch

from zenith.callpath import build_call
from zenith.importer import CONVERTERS, DTYPES, Lowering, Unsupported, meta
from zenith.segment import VIEWS, Segment
from zenith.weights import WeightWatch

log = logging.getLogger("zenith")


def _is_tensor_node(n):
    m = meta(n)
    if isinstance(m, torch.Tensor):
        return True
    if isinstance(m, (list, tuple)):
        return any(isinstance(x, torch.Tensor) for x in m)
    return False


def _target_name(n):
    t = n.target
    if isinstance(t, torch._ops.OpOverload):
        return f"{t.namespace}.{t.overloadpacket.__name__}.{t._overloadname}"
    return getattr(t, "__name__", str(t))


@dataclass
class GraphReport:
    nodes_total: int = 0
    nodes_native: int = 0
    fallback_ops: dict = field(default_factory=dict)  # op name -> {"count": n, "reason": str}
    passes: dict = field(default_factory=dict)  # pass name -> changes
    segments: int = 0
    zenith_ops: dict = field(default_factory=dict)  # Zenith op -> count after passes
    compile_seconds: float = 0.0
    aten_trace: str = "AOTAutograd"  # or "direct" (backend._direct_inference), "export" (zenith.freeze)
    executables: list = field(default_factory=list, repr=False)  # one per Zenith segment

    @property
    def planned_bytes(self):
        """Arena bytes of each segment's most recent plan (0 before the first call)."""
        return sum(e.arena_bytes for e in self.executables)

    @property
    def packed_weight_bytes(self):
        """Bytes of weights the segments keep packed (pack_weights, after a call)."""
        return sum(e.packed_bytes for e in self.executables)


def _check_node(node):
    """None if Zenith can run `node`, else the reason it cannot."""
    conv = CONVERTERS.get(node.target)
    if conv is None:
        if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
            return "random numbers come from PyTorch's generator (torch.manual_seed holds)"
        return "no Zenith kernel for this op"
    L = Lowering()
    try:
        if node.target is operator.getitem:
            src = node.args[0]
            res = _check_node(src)
            if res:
                return res
            sub = Lowering()
            tup = CONVERTERS[src.target](sub, src)
            if not isinstance(tup, tuple) or tup[node.args[1]] is None:
                return f"output {node.args[1]} of {_target_name(src)} is not produced"
            return None
        res = conv(L, node)
        _check_types(L, node, res)
    except Unsupported as e:
        return str(e)
    except RuntimeError as e:  # C++ shape/dtype inference refused the node
        return f"rejected by Zenith: {e}"
    except Exception as e:  # a converter's own bug: the node runs in PyTorch, visibly, not a failed compile
        if os.environ.get("ZENITH_STRICT_IMPORTER", "0") not in ("", "0"):  # the test suite's: such a bug fails
            raise
        log.warning("zenith: converting %s failed (%s: %s); it runs in PyTorch. Please report this.",
                    _target_name(node), type(e).__name__, e)
        return f"importer error ({type(e).__name__}: {e})"
    return None


def _check_types(L, node, res):
    metas = meta(node)
    vals = res if isinstance(res, tuple) else (res,)
    metas = metas if isinstance(metas, (list, tuple)) else (metas,)
    for v, m in zip(vals, metas):
        if v is None or not isinstance(m, torch.Tensor):
            continue
        if L.dtype(v) != DTYPES.get(m.dtype):
            raise Unsupported(f"dtype inference gives {L.dtype(v)}, PyTorch says {m.dtype}")
        shape = L.shape(v)
        if len(shape) != m.dim():
            raise Unsupported(f"rank inference gives {len(shape)}, PyTorch says {m.dim()}")
        for a, b in zip(shape, m.shape):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise Unsupported(f"shape inference gives {shape}, PyTorch says {list(m.shape)}")


# Ops that read their input through its storage (strides and offset), not its values.
_STORAGE_READERS = {torch.ops.aten.as_strided.default}
# Ops whose output is a view of their first input (what a storage reader above sees
# through): they run in PyTorch too, on a base that has eager's layout.
_VIEWS = VIEWS | {torch.ops.aten.split.Tensor}


def _storage_readers_take_their_views(nodes, fallback_reason):
    """A fallback as_strided reads its input's storage in eager's layout. A segment output
    has it (callpath gives outputs PyTorch reads eager's dense layout), but a view Zenith
    computes (a slice, a transpose) is written as a tensor of its own, not a window on
    its base: so the views between as_strided and the value they are views of run in
    PyTorch as well, on that value."""
    for n in nodes:
        if n.op != "call_function" or n.target not in _STORAGE_READERS or n not in fallback_reason:
            continue
        src = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
        while src is not None and src.op == "call_function" and (src.target in _VIEWS or src.target is operator.getitem):
            fallback_reason.setdefault(src, f"a view read by {_target_name(n)} through its storage")
            src = src.args[0] if src.args and isinstance(src.args[0], torch.fx.Node) else None


@dataclass
class Partition:
    """Which nodes run where, in call order."""
    steps: list  # ("zenith", Segment) | ("torch", fx node)
    fallback_reason: dict  # fx node -> why PyTorch runs it
    sym_nodes: set  # scalar (SymInt) nodes; PyTorch evaluates those in `steps` only


def partition(nodes, options):
    """Splits an ATen graph's nodes into Zenith segments and PyTorch steps."""
    out_node = next(n for n in nodes if n.op == "output")
    # 1. Decide, per node, Zenith or PyTorch.
    fallback_reason = {}
    sym_nodes = set()
    for n in nodes:
        if n.op != "call_function":
            continue
        if not _is_tensor_node(n) and n.target is not operator.getitem:
            sym_nodes.add(n)
            continue
        reason = _check_node(n)
        if reason:
            fallback_reason[n] = reason
    _storage_readers_take_their_views(nodes, fallback_reason)
    if not options.get("fallback", True) and fallback_reason:
        n, r = next(iter(fallback_reason.items()))
        raise RuntimeError(f"zenith: {_target_name(n)} cannot run natively ({r}) and fallback=False")

    # 2. Scalar nodes needed by PyTorch-side consumers run in PyTorch too.
    needed = set()
    stack = [a for n in list(fallback_reason) + [out_node] for a in n.all_input_nodes if a in sym_nodes]
    while stack:
        s = stack.pop()
        if s not in needed:
            needed.add(s)
            stack.extend(a for a in s.all_input_nodes if a in sym_nodes)

    # 3. Segments: maximal runs of native nodes. PyTorch nodes that read only graph
    # inputs (directly or through each other) run first, so they do not split the
    # segments they sit between (GPT-2 with dynamic=True computes its GELU constant
    # from math.pi, a graph input, in float64 in every layer).
    torch_side = [n for n in nodes if n.op == "call_function" and (n in fallback_reason or n in needed)]
    early = set()
    for n in torch_side:
        if all(a.op in ("placeholder", "get_attr") or a in early for a in n.all_input_nodes):
            early.add(n)
    steps = [("torch", n) for n in torch_side if n in early]
    seg = None
    segments = 0
    for n in nodes:
        if n.op != "call_function" or n in early:
            continue
        if n in sym_nodes and n not in needed:
            continue
        if n in fallback_reason or n in needed:
            seg = None
            steps.append(("torch", n))
            continue
        if seg is None:
            seg = Segment(segments)
            segments += 1
            steps.append(("zenith", seg))
        seg.nodes.append(n)
    return Partition(steps, fallback_reason, sym_nodes)


def _lower_segments(gm, steps, options, report):
    """Compiles every segment; a segment's outputs are the values read outside it."""
    node_step = {}
    for i, (kind, x) in enumerate(steps):
        for n in (x.nodes if kind == "zenith" else [x]):
            node_step[n] = i

    def users_outside(n):
        i = node_step[n]
        return any(u.op == "output" or node_step.get(u) != i for u in n.users)

    for kind, x in steps:
        if kind == "zenith":
            x.lower(gm, users_outside, options, report)


def _static_input_indices():
    """Graph inputs AOTAutograd knows to be parameters or buffers (empty outside a trace)."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx else None
    return list(getattr(meta, "static_input_indices", None) or [])


def _weight_watch(placeholders, segments, static):
    """The WeightWatch over the static inputs of the segments (constant weights)."""
    position = {n: i for i, n in enumerate(placeholders)}
    pairs = [(seg.exe, [(i, position[n]) for i, (n, p) in enumerate(zip(seg.in_nodes, seg.in_perms))
                        if n in position and position[n] in static and p is None])
             for seg in segments]
    return WeightWatch(sorted(static), pairs)


def _symbol_bindings(placeholders):
    """(placeholder index, dim or None, symbol name) for every symbol a graph input
    carries: a dim of a tensor input, or a SymInt input itself."""
    bind = []
    for i, p in enumerate(placeholders):
        m = meta(p)
        if isinstance(m, torch.SymInt) and m.node.expr.is_symbol:
            bind.append((i, None, str(m.node.expr)))
        elif isinstance(m, torch.Tensor):
            for d, s in enumerate(m.shape):
                if isinstance(s, torch.SymInt) and s.node.expr.is_symbol:
                    bind.append((i, d, str(s.node.expr)))
    return bind


STATS = {"graphs_compiled": 0, "nodes_native": 0, "nodes_fallback": 0, "calls": 0, "segments_run": 0,
         "fallback_node_runs": 0}


class CompiledGraph:
    """The callable AOTAutograd gets back: boxed (takes a list of arguments)."""

    def __init__(self, gm: torch.fx.GraphModule, options: dict, static_inputs=None):
        """static_inputs: positions of the graph inputs that are parameters or buffers
        (default: what AOTAutograd reports for the graph being compiled)."""
        t0 = time.perf_counter()
        # An instance attribute: AOTAutograd wraps backward compilers with
        # functools.wraps, which copies __dict__ but not class attributes.
        self._boxed_call = True
        self.report = GraphReport()
        self.gm = gm
        graph = gm.graph
        graph.eliminate_dead_code()  # ATen graphs are functional; unused tuple items would split segments
        nodes = list(graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        out_node = next(n for n in nodes if n.op == "output")

        part = partition(nodes, options)
        self.steps = part.steps
        self.segments = [x for kind, x in self.steps if kind == "zenith"]
        _lower_segments(gm, self.steps, options, self.report)

        # Constant weights (inference only): parameters and buffers, which AOTAutograd
        # reports as static inputs (Dynamo tags them on the direct path).
        self.static_positions = []
        self.weights = None  # WeightWatch, when segments may keep weights packed
        if options.get("inference"):
            static = set(_static_input_indices() if static_inputs is None else static_inputs)
            self.static_positions = sorted(static & set(range(len(self.placeholders))))
            if options.get("pack_weights", True) and self.static_positions and self.segments:
                self.weights = _weight_watch(self.placeholders, self.segments, set(self.static_positions))

        STATS["graphs_compiled"] += 1
        self.serial = STATS["graphs_compiled"]  # names this graph's segments in profiler traces
        self._attrs = {n: getattr(gm, n.target) for n in nodes if n.op == "get_attr"}
        self._out_spec = out_node.args[0]
        self._call, self.call_source = self._build_call()
        self.pinned_source = None  # the pinned call's code, once pin() made one
        self._fill_report(nodes, part, time.perf_counter() - t0)

    def _build_call(self, pinned=None):
        return build_call(
            placeholders=self.placeholders, steps=self.steps, attrs=self._attrs, out_spec=self._out_spec,
            sym_bind=_symbol_bindings(self.placeholders), static_positions=self.static_positions,
            weights=self.weights, serial=self.serial, stats=STATS, pinned=pinned)

    def pin(self, tensors):
        """The call for a caller that passes the same static inputs every time (a frozen
        model): `tensors` are those, in static position order; the function returned
        takes the other inputs only, as a list, and returns what __call__ does. Reading
        the weights as its own globals saves building, unpacking and checking by id a list of every
        weight per call (MobileNet V2: 263)."""
        tensors = list(tensors)
        if len(tensors) != len(self.static_positions):
            raise RuntimeError(f"zenith: {len(tensors)} tensors to pin for {len(self.static_positions)} "
                               "static inputs")
        fn, self.pinned_source = self._build_call(dict(zip(self.static_positions, tensors)))
        return fn

    def _fill_report(self, nodes, part, seconds):
        r = self.report
        counted = [n for n in nodes if n.op == "call_function" and n not in part.sym_nodes
                   and n.target is not operator.getitem]
        r.nodes_total = len(counted)
        r.nodes_native = sum(1 for n in counted if n not in part.fallback_reason)
        r.segments = len(self.segments)
        r.executables = [seg.exe for seg in self.segments]
        for n, reason in part.fallback_reason.items():
            if n.target is operator.getitem:
                continue
            name = _target_name(n)
            e = r.fallback_ops.setdefault(name, {"count": 0, "reason": reason})
            e["count"] += 1
        for name, e in r.fallback_ops.items():
            log.info("zenith: %s runs in PyTorch (%d node%s): %s", name, e["count"], "s" * (e["count"] != 1),
                     e["reason"])
        r.compile_seconds = seconds
        STATS["nodes_native"] += r.nodes_native
        STATS["nodes_fallback"] += r.nodes_total - r.nodes_native
        log.info("zenith: compiled graph: %d/%d nodes native in %d segment(s), %d fallback op type(s), %.3fs",
                 r.nodes_native, r.nodes_total, r.segments, len(r.fallback_ops), r.compile_seconds)

    def __call__(self, args):
        return self._call(args)
