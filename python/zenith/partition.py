"""Compiles one ATen fx graph (from AOTAutograd) into a callable.

Nodes Zenith supports are grouped into maximal runs ("segments"), each lowered to a
Zenith graph and run by the C++ runtime. Nodes it does not support run through
PyTorch between the segments, with one log line per op type giving the reason.
Scalar (SymInt) nodes are evaluated by PyTorch only where a fallback op or the
graph's outputs need them; Zenith segments bind symbols from input shapes.
"""
from __future__ import annotations

import logging
import operator
import time
import weakref
from dataclasses import dataclass, field

import torch

from zenith import _C
from zenith.importer import CONVERTERS, DTYPE_CODES, DTYPES, Lowering, Unsupported, meta

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
        return f"aten.{t.overloadpacket.__name__}.{t._overloadname}"
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
    aten_trace: str = "AOTAutograd"  # or "direct" (backend._direct_inference)
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


_VIEW_OPS = {torch.ops.aten.t.default, torch.ops.aten.permute.default, torch.ops.aten.transpose.int}


class _Segment:
    def __init__(self):
        self.nodes = []

    def lower(self, gm, users_outside, options, report):
        L = Lowering(gm)
        for n in self.nodes:
            L.env[n] = CONVERTERS[n.target](L, n)
        self.out_nodes = [n for n in self.nodes if users_outside(n)]
        # A transpose of a graph input that leaves the segment (AOTAutograd saves weight
        # transposes for backward) is a free view in PyTorch but a full copy as a Zenith
        # output: PyTorch makes it; uses inside the segment still see it (as trans_b).
        self.torch_views = [n for n in self.out_nodes if n.target in _VIEW_OPS and isinstance(n.args[0], torch.fx.Node)
                            and n.args[0].op in ("placeholder", "get_attr")]
        if len(self.torch_views) == len(self.out_nodes):
            self.torch_views = []
        self.out_nodes = [n for n in self.out_nodes if n not in self.torch_views]
        outs = []
        for n in self.out_nodes:
            v = L.env[n]
            if isinstance(v, tuple):
                raise RuntimeError(f"zenith: tuple value {n.name} escapes its segment")
            outs.append(v)
        L.g.set_outputs(outs)
        if options.get("passes", True):
            for name, changes in L.g.run_passes(options.get("verify", False)):
                report.passes[name] = report.passes.get(name, 0) + changes
        for op, c in L.g.op_counts().items():
            report.zenith_ops[op] = report.zenith_ops.get(op, 0) + c
        self.symbols = _graph_symbols(L)
        self.exe = _C.Executable(L.g, self.symbols)
        self.in_nodes = L.inputs
        self.in_perms = L.input_perms
        self.keepalive = L.const_keepalive
        self.graph = L.g


def _static_input_indices():
    """Graph inputs AOTAutograd knows to be parameters or buffers (empty outside a trace)."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx else None
    return list(getattr(meta, "static_input_indices", None) or [])


def _graph_symbols(L):
    """Every symbol the segment's graph mentions (input shapes, view sizes, slice
    bounds); the runtime receives each one's value at call time."""
    return list(L.g.symbols)


_DTYPE_CODES = {t: DTYPE_CODES[name] for t, name in DTYPES.items()}  # torch dtype -> the C++ core's code


def _raw(t, keep):
    """(data_ptr, dtype code, shape) for the runtime; `keep` holds any contiguous copy
    alive until the call returns."""
    if not t.is_contiguous():
        t = t.contiguous()
        keep.append(t)
    if not t.is_cpu:  # (t.device.type costs 0.3 us a call; is_cpu 0.04)
        raise RuntimeError(f"zenith: a {t.device.type} tensor reached a CPU segment")
    return (t.data_ptr(), _DTYPE_CODES[t.dtype], tuple(t.shape))


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
        self.steps = [("torch", n) for n in torch_side if n in early]  # ("zenith", segment) | ("torch", node)
        seg = None
        for n in nodes:
            if n.op != "call_function" or n in early:
                continue
            if n in sym_nodes and n not in needed:
                continue
            if n in fallback_reason or n in needed:
                seg = None
                self.steps.append(("torch", n))
                continue
            if seg is None:
                seg = _Segment()
                self.steps.append(("zenith", seg))
            seg.nodes.append(n)

        node_step = {}
        for i, (kind, x) in enumerate(self.steps):
            for n in (x.nodes if kind == "zenith" else [x]):
                node_step[n] = i

        def users_outside(n):
            i = node_step[n]
            return any(u.op == "output" or node_step.get(u) != i for u in n.users)

        for kind, x in self.steps:
            if kind == "zenith":
                x.lower(gm, users_outside, options, self.report)

        # 4. Bookkeeping for calls.
        self.sym_bind = []  # (placeholder index, dim or None, symbol name)
        for i, p in enumerate(self.placeholders):
            m = meta(p)
            if isinstance(m, torch.SymInt) and m.node.expr.is_symbol:
                self.sym_bind.append((i, None, str(m.node.expr)))
            elif isinstance(m, torch.Tensor):
                for d, s in enumerate(m.shape):
                    if isinstance(s, torch.SymInt) and s.node.expr.is_symbol:
                        self.sym_bind.append((i, d, str(s.node.expr)))
        # 5. Constant weights (inference only): parameters, which AOTAutograd reports as
        # static inputs, may stay packed in the segments that read them. PyTorch's version
        # counter tells when one changed in place (optimizer step, load_state_dict, ...).
        # Inference tensors (made under torch.inference_mode) have no version counter, yet
        # may still change in place inside inference_mode: such weights are never kept
        # packed (each call packs them afresh, as for any other input).
        self.static_positions = []
        self._versions = None
        self._storages = ()  # weak references to the storages of the last call's static inputs
        self._unversioned = ()  # static positions whose tensors were inference tensors last call
        if options.get("inference") and options.get("pack_weights", True):
            static = set(_static_input_indices() if static_inputs is None else static_inputs)
            self.static_positions = sorted(static & set(range(len(self.placeholders))))
            position = {n: i for i, n in enumerate(self.placeholders)}
            for kind, x in self.steps:
                if kind == "zenith":  # (segment input, graph input) of each constant weight
                    x.const_inputs = [(i, position[n]) for i, (n, p) in enumerate(zip(x.in_nodes, x.in_perms))
                                      if n in position and position[n] in static and p is None]
            self._mark_constant_inputs()
        self.torch_fns = {x: _torch_target(x.target) for kind, x in self.steps if kind == "torch"}
        self.out_spec = out_node.args[0]
        # Module attributes (tensor constants) that PyTorch-side nodes or outputs may read.
        self.attrs = {n: getattr(gm, n.target) for n in nodes if n.op == "get_attr"}

        r = self.report
        counted = [n for n in nodes if n.op == "call_function" and n not in sym_nodes and n.target is not operator.getitem]
        r.nodes_total = len(counted)
        r.nodes_native = sum(1 for n in counted if n not in fallback_reason)
        r.segments = sum(1 for k, _ in self.steps if k == "zenith")
        r.executables = [x.exe for k, x in self.steps if k == "zenith"]
        for n, reason in fallback_reason.items():
            if n.target is operator.getitem:
                continue
            name = _target_name(n)
            e = r.fallback_ops.setdefault(name, {"count": 0, "reason": reason})
            e["count"] += 1
        for name, e in r.fallback_ops.items():
            log.info("zenith: %s runs in PyTorch (%d node%s): %s", name, e["count"], "s" * (e["count"] != 1),
                     e["reason"])
        r.compile_seconds = time.perf_counter() - t0
        STATS["graphs_compiled"] += 1
        STATS["nodes_native"] += r.nodes_native
        STATS["nodes_fallback"] += r.nodes_total - r.nodes_native
        log.info("zenith: compiled graph: %d/%d nodes native in %d segment(s), %d fallback op type(s), %.3fs",
                 r.nodes_native, r.nodes_total, r.segments, len(r.fallback_ops), r.compile_seconds)

    # -- calls --
    def _symbols(self, args):
        b = {}
        for i, d, name in self.sym_bind:
            a = args[i]
            b[name] = int(a) if d is None else a.shape[d]
        return b

    def _run_segment(self, seg, env, syms):
        keep = []
        ins = [_raw(env[n] if p is None else env[n].permute(p), keep) for n, p in zip(seg.in_nodes, seg.in_perms)]
        ints = [syms[s] for s in seg.symbols]
        outs = seg.exe.run_raw(ins, ints)
        for n, t in zip(seg.out_nodes, outs):
            env[n] = t
        for n in seg.torch_views:
            env[n] = n.target(*torch.fx.node.map_arg(n.args, lambda a: env[a]))
        STATS["segments_run"] += 1

    def _mark_constant_inputs(self, unversioned=()):
        """Tells each segment which of its inputs it may keep packed: the static ones,
        except those at graph positions in `unversioned` (inference tensors)."""
        for kind, x in self.steps:
            if kind == "zenith":
                x.exe.set_constant_inputs([i for i, pos in x.const_inputs if pos not in unversioned])

    def _check_weight_versions(self, args):
        try:
            versions = [args[i]._version for i in self.static_positions]
        except RuntimeError:  # inference tensors do not track a version counter
            versions = [None if args[i].is_inference() else args[i]._version for i in self.static_positions]
        # And their storages: new memory may sit where freed memory was, with the same
        # version (module.to(bfloat16) then .to(float32) swaps each parameter's storage
        # under the same tensor; a checkpoint loaded with mmap=True, assign=True twice
        # between calls). PyTorch keeps one Python object per live storage, and a weak
        # reference dies with it, so no later storage matches.
        storages = [args[i].untyped_storage() for i in self.static_positions]
        same = len(self._storages) == len(storages) and all(
            map(operator.is_, [r() for r in self._storages], storages))
        if versions != self._versions or not same:
            unversioned = tuple(i for i, v in zip(self.static_positions, versions) if v is None)
            if unversioned != self._unversioned:  # also forgets every packed copy
                self._mark_constant_inputs(unversioned)
                self._unversioned = unversioned
            elif self._versions is not None:  # a weight changed in place: repack on next use
                for kind, x in self.steps:
                    if kind == "zenith":
                        x.exe.drop_packed()
            self._storages = [weakref.ref(s) for s in storages]
            self._versions = versions

    def __call__(self, args):
        STATS["calls"] += 1
        _C.set_num_threads(torch.get_num_threads())  # one thread budget shared with PyTorch
        if self.static_positions:
            self._check_weight_versions(args)
        syms = self._symbols(args) if self.sym_bind else {}
        env = dict(zip(self.placeholders, args))
        env.update(self.attrs)
        if isinstance(args, list):
            args.clear()  # boxed calling convention: the callee releases the inputs early
        for kind, x in self.steps:
            if kind == "zenith":
                self._run_segment(x, env, syms)
            else:
                a = torch.fx.node.map_arg(x.args, lambda n: env[n])
                k = torch.fx.node.map_arg(x.kwargs, lambda n: env[n])
                env[x] = self.torch_fns[x](*a, **k)
                STATS["fallback_node_runs"] += 1
        return _map_out(self.out_spec, env)


def _convert_element_type(x, dtype):
    return x.to(dtype, copy=True)


def _torch_target(target):
    """What runs a fallback node: the node's own op, except prims.convert_element_type,
    whose Python prim implementation costs ~0.3 ms a call; Tensor.to is the same
    conversion through the C++ dispatcher."""
    return _convert_element_type if target is torch.ops.prims.convert_element_type.default else target


def _map_out(spec, env):
    if isinstance(spec, torch.fx.Node):
        return env[spec]
    if isinstance(spec, (list, tuple)):
        return type(spec)(_map_out(s, env) for s in spec)
    return spec
