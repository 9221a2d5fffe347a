"""The per-call code of a compiled graph, generated once as straight-line Python.

A call of a CompiledGraph runs one function written for that graph: no loop over
steps, no dictionary of values, nothing recomputed that compiling fixed. Inputs are
unpacked into locals, each Zenith segment is one call of its Executable with its
inputs in a list (a parameter's data pointer, any other input's (data pointer, dtype
code, shape)), each PyTorch fallback node is
one call of its op, and every value is released after its last use (the boxed
calling convention hands the inputs over, so they can go early too). For the common
case, the whole graph one Zenith segment, the code reads (a 2-layer MLP):

    def call(args):
        _stats['calls'] += 1
        _stats['segments_run'] += 1
        _set_threads(_get_threads())
        _slot = _weights.check(args)
        p0, p1, p2, p3, p4 = args
        if args.__class__ is list: args.clear()
        # segment 0: 5 ATen nodes
        k = []
        i = [p0.data_ptr(), p1.data_ptr(), _raw(p2, k), ...]
        if _prof._is_profiler_enabled:
            with _RF(_ev0, keyword_values=_kw0):
                r = _run0(i, (), _slot)
        else:
            r = _run0(i, (), _slot)
        v0, = r
        del p0, p1, p2, p3, p4
        return (v0,)

Static inputs (parameters and buffers) pass only their data pointer, a bare int
(the runtime takes the dtype and shape they were compiled with; no tuple to build,
parse or collect): Dynamo guards every one of them (dtype, device, sizes, strides)
and recompiles when those change, and their in-place changes are WeightWatch's
business. Every other input goes through `_raw`,
which checks device and layout and reads dtype and shape from the tensor; the
runtime validates those against the compiled types.
"""
from __future__ import annotations

import linecache
import math

import torch
from torch.fx.immutable_collections import immutable_dict, immutable_list

from zenith import _C
from zenith.importer import DTYPE_CODES, DTYPES

_DTYPE_CODES = {t: DTYPE_CODES[name] for t, name in DTYPES.items()}  # torch dtype -> runtime code


def _raw(t, keep):
    """(data_ptr, dtype code, shape) of a tensor for the runtime; `keep` holds any
    contiguous copy alive until the call returns."""
    if not t.is_contiguous():
        t = t.contiguous()
        keep.append(t)
    if not t.is_cpu:  # (t.device.type costs 0.3 us a call; is_cpu 0.04)
        raise RuntimeError(f"zenith: a {t.device.type} tensor reached a CPU segment")
    return (t.data_ptr(), _DTYPE_CODES[t.dtype], t.shape)


def _unbound_symbol(name):
    raise RuntimeError(f"zenith: symbol {name} of a segment is bound by no graph input")


def _record_function():
    """PyTorch's cheapest profiler range (what Dynamo and Inductor use), else the public one."""
    fast = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)
    if fast is not None:
        return fast
    return lambda name, keyword_values=None: torch.profiler.record_function(name)


def segment_event_name(serial, index):
    """The name of a segment's range in torch.profiler traces."""
    return f"zenith: graph {serial} segment {index}"


def _convert_element_type(x, dtype):
    return x.to(dtype, copy=True)


def _torch_target(target):
    """What runs a fallback node: the node's own op, except prims.convert_element_type,
    whose Python prim implementation costs ~0.3 ms a call; Tensor.to is the same
    conversion through the C++ dispatcher."""
    return _convert_element_type if target is torch.ops.prims.convert_element_type.default else target


def _hint(d):
    """An int, or a SymInt's value in the example the graph was traced with (None if none)."""
    return d if isinstance(d, int) else getattr(getattr(d, "node", None), "hint", None)


def _eager_layout(node):
    """How eager lays out a graph value where that is not its shape's contiguous layout (a
    channels_last conv's output, a permuted result), dense only (the runtime writes dense
    tensors): ("strides", eager's strides) for a static shape, ("order", the dims from
    outermost to innermost) under symbolic sizes, whose memory order is fixed while the
    sizes move (torch.compile makes the batch symbolic at the second size it sees). None
    where eager's layout is contiguous, not dense, or unknown."""
    m = node.meta.get("val")
    if not isinstance(m, torch.Tensor):
        return None
    shape, stride = [_hint(d) for d in m.shape], [_hint(d) for d in m.stride()]
    if None in shape or None in stride or 0 in shape:
        return None
    dims = sorted(range(len(shape)), key=lambda i: (-stride[i], i))  # outermost first
    expect = 1  # dense: the strides, innermost first, are the products of the faster sizes
    for i in reversed(dims):
        if shape[i] != 1 and stride[i] != expect:
            return None
        expect *= shape[i]
    contiguous, acc = True, 1
    for i in reversed(range(len(shape))):
        if shape[i] != 1 and stride[i] != acc:
            contiguous = False
        acc *= shape[i]
    if contiguous:
        return None
    if all(isinstance(d, int) for d in (*m.shape, *m.stride())):
        return ("strides", tuple(m.stride()))
    return ("order", tuple(dims))


def _restride(v, stride):
    """v with eager's strides (a copy when they differ): what eager returns for a graph
    output, as Inductor keeps it too; the runtime writes its outputs contiguous."""
    if v.stride() == stride:
        return v
    out = torch.empty_strided(v.shape, stride, dtype=v.dtype, device=v.device)
    out.copy_(v)
    return out


def _relayout(v, order):
    """v with its dims in memory in `order` (outermost first; a copy when they are not):
    _restride for symbolic sizes."""
    if v.permute(order).is_contiguous():
        return v
    out = torch.empty_permuted(v.shape, order, dtype=v.dtype, device=v.device)
    out.copy_(v)
    return out


def _trusted_static(node, index, static_positions):
    """Whether a static input's compiled layout can be passed as is (by its data pointer
    alone): a placeholder at a static position, dense, of static shape."""
    if node.op != "placeholder" or index not in static_positions:
        return False
    m = node.meta.get("val")
    if not isinstance(m, torch.Tensor) or m.dtype not in _DTYPE_CODES or m.device.type != "cpu":
        return False
    return all(isinstance(d, int) for d in (*m.shape, *m.stride())) and m.is_contiguous()


class _Writer:
    def __init__(self):
        self.lines = []
        self.ns = {}  # the generated function's globals
        self._consts = {}

    def line(self, text, depth=1):
        self.lines.append("    " * depth + text)

    def bind(self, prefix, obj):
        """A global name for obj in the generated code."""
        key = (prefix, id(obj))
        if key not in self._consts:
            name = f"_{prefix}{len(self._consts)}"
            self._consts[key] = name
            self.ns[name] = obj
        return self._consts[key]


def build_call(placeholders, steps, attrs, out_spec, sym_bind, static_positions, weights, serial, stats,
               pinned=None):
    """Generates the call of a compiled graph. Returns (function, source).

    placeholders: the graph's placeholder nodes (call arguments, in order); steps:
    ("zenith", Segment) | ("torch", node) in call order; attrs: get_attr node -> value;
    out_spec: the output node's argument; sym_bind: (placeholder index, dim or None,
    symbol) per symbol an input carries; static_positions: inputs that are parameters
    or buffers; weights: a WeightWatch or None; serial: the graph's number (profiler
    event names); stats: the process-wide counters; pinned: None, or the tensor of every
    static position (a frozen model's bound weights): the call then takes only the
    other inputs, in order, and reads the pinned tensors as globals of its own (no list
    of every weight built, unpacked and checked by id per call)."""
    w = _Writer()
    static_positions = set(static_positions)
    names = {p: f"p{i}" for i, p in enumerate(placeholders)}
    if pinned is not None:
        if set(pinned) != static_positions:
            raise RuntimeError("zenith: a pinned call needs a tensor for every static input and only those")
        for i, t in pinned.items():
            names[placeholders[i]] = w.bind("s", t)
    taken = [p for i, p in enumerate(placeholders) if pinned is None or i not in pinned]  # from args
    for n, value in attrs.items():
        names[n] = w.bind("a", value)

    def ref(n):
        if n not in names:
            raise RuntimeError(f"zenith: call path reads {n.name} before any step makes it")
        return names[n]

    def emit(a):
        """Python source for an fx argument (nodes become their locals)."""
        if isinstance(a, torch.fx.Node):
            return ref(a)
        if a is None or type(a) in (bool, int, str):
            return repr(a)
        if type(a) is float and math.isfinite(a):
            return repr(a)
        nodes_inside = isinstance(a, (list, tuple, dict, slice)) and bool(_nodes_in(a))
        if type(a) in (list, immutable_list) or (isinstance(a, list) and nodes_inside):
            return "[" + ", ".join(emit(x) for x in a) + "]"
        if type(a) is tuple or (isinstance(a, tuple) and nodes_inside):
            return "(" + ", ".join(emit(x) for x in a) + ("," if len(a) == 1 else "") + ")"
        if type(a) in (dict, immutable_dict) or (isinstance(a, dict) and nodes_inside):
            return "{" + ", ".join(f"{emit(k)}: {emit(v)}" for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return f"slice({emit(a.start)}, {emit(a.stop)}, {emit(a.step)})"
        return w.bind("c", a)

    # Where each local is read last: it is deleted right after that step.
    outputs = set(_nodes_in(out_spec))
    last_read = {}
    for j, (kind, x) in enumerate(steps):
        reads = x.in_nodes + [a for v in x.torch_views for a in _nodes_in(v.args)] if kind == "zenith" \
            else _nodes_in((x.args, x.kwargs))
        for n in reads:
            last_read[n] = j
    dead_after = {}
    for n, j in last_read.items():
        if n not in outputs and ((n.op == "placeholder" and n in taken) or n.op == "call_function"):
            dead_after.setdefault(j, []).append(n)
    unused = [p for p in taken if p not in last_read and p not in outputs]

    segments = [x for kind, x in steps if kind == "zenith"]
    # values PyTorch reads: by fallback nodes, and views it makes of segment outputs
    torch_read = set(_nodes_in([x.args for kind, x in steps if kind == "torch"]
                               + [x.kwargs for kind, x in steps if kind == "torch"]
                               + [v.args for kind, x in steps if kind == "zenith" for v in x.torch_views]))
    restrided = set()
    fallbacks = len(steps) - len(segments)
    w.ns.update(_stats=stats, _set_threads=_C.set_num_threads, _get_threads=torch.get_num_threads,
                _weights=weights, _raw=_raw, _prof=torch.autograd.profiler, _RF=_record_function(),
                _unbound_symbol=_unbound_symbol)
    w.lines.append("def call(args):")
    w.line("_stats['calls'] += 1")
    if segments:
        w.line(f"_stats['segments_run'] += {len(segments)}")
        w.line("_set_threads(_get_threads())  # one thread budget shared with PyTorch")
    if fallbacks:
        w.line(f"_stats['fallback_node_runs'] += {fallbacks}")
    if weights is not None and pinned is not None:
        w.ns["_check"] = weights.pinned([pinned[i] for i in weights.positions])
        w.line("_slot = _check()  # the weight slot of the pinned weights (kept packed copies)")
    elif weights is not None:
        w.line("_slot = _weights.check(args)  # the weight slot of these weights (kept packed copies)")
    if taken:
        w.line(", ".join(names[p] for p in taken) + ", = args")
    w.line("if args.__class__ is list: args.clear()  # boxed convention: the inputs are ours to release")
    symbol = {}  # symbol name -> local holding its value
    needed = {s for seg in segments for s in seg.symbols}
    for i, d, name in sym_bind:
        if name in needed and name not in symbol:
            symbol[name] = f"y{len(symbol)}"
            p = names[placeholders[i]]
            w.line(f"{symbol[name]} = " + (f"int({p})" if d is None else f"{p}.shape[{d}]"))
    if unused:
        w.line("del " + ", ".join(names[p] for p in unused))

    count = 0
    for j, (kind, x) in enumerate(steps):
        if kind == "torch":
            w.line(f"# {x.name}: {x.target}")
            fn = w.bind("f", _torch_target(x.target))
            args = [emit(a) for a in x.args] + [f"{k}={emit(v)}" for k, v in x.kwargs.items()]
            names[x] = f"v{count}"
            count += 1
            w.line(f"{names[x]} = {fn}({', '.join(args)})")
        else:
            _emit_segment(w, x, names, ref, emit, symbol, static_positions, placeholders, serial,
                          weights is not None)
            for n in x.out_nodes:
                names[n] = f"v{count}"
                count += 1
            if x.out_nodes:
                w.line(", ".join(names[n] for n in x.out_nodes) + ", = r")
            for n in x.out_nodes:  # what PyTorch reads gets eager's strides (a view may need them)
                if (n in outputs or n in torch_read) and _emit_relayout(w, n, names[n]):
                    restrided.add(n)
            for v in x.torch_views:
                names[v] = f"v{count}"
                count += 1
                args = ", ".join(emit(a) for a in v.args)
                w.line(f"{names[v]} = {w.bind('f', v.target)}({args})  # a view PyTorch makes for free")
        if j in dead_after:
            w.line("del " + ", ".join(names[n] for n in dead_after[j]))
    # Outputs whose eager strides are not contiguous get them (once each, so one tensor
    # returned twice stays one object); inputs returned as they are keep their own.
    for n in dict.fromkeys(_nodes_in(out_spec)):
        if n.op != "placeholder" and n not in restrided:
            _emit_relayout(w, n, names[n])
    w.line(f"return {emit(out_spec)}")

    source = "\n".join(w.lines) + "\n"
    filename = f"<zenith graph {serial} call{' (pinned)' if pinned is not None else ''}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show it
    exec(compile(source, filename, "exec"), w.ns)
    return w.ns["call"], source


def _emit_relayout(w, node, local):
    """The line giving `local` (node's value) eager's layout, if eager's is not contiguous."""
    layout = _eager_layout(node)
    if layout is None:
        return False
    kind, value = layout
    fn = {"strides": _restride, "order": _relayout}[kind]
    w.ns[fn.__name__] = fn
    w.line(f"{local} = {fn.__name__}({local}, {value!r})  # eager's layout")
    return True


def _emit_segment(w, seg, names, ref, emit, symbol, static_positions, placeholders, serial, slotted):
    """One segment's call; slotted: the call passes `_slot` (WeightWatch.check's answer)."""
    position = {p: i for i, p in enumerate(placeholders)}
    w.line(f"# segment {seg.index}: {len(seg.nodes)} ATen nodes")
    raws = []
    keep = False
    for n, perm in zip(seg.in_nodes, seg.in_perms):
        if perm is None and _trusted_static(n, position.get(n), static_positions):
            # the bare pointer: the runtime takes the compiled dtype and shape
            raws.append(f"{ref(n)}.data_ptr()")
        else:
            keep = True
            value = ref(n) if perm is None else f"{ref(n)}.permute({list(perm)!r})"
            raws.append(f"_raw({value}, k)")
    if keep:
        w.line("k = []")
    w.line("i = [" + ", ".join(raws) + "]")
    ints = [symbol[s] if s in symbol else f"_unbound_symbol({s!r})" for s in seg.symbols]
    ints = "[" + ", ".join(ints) + "]" if ints else "()"
    run = w.bind("run", seg.exe.run_raw)
    event = w.bind("ev", segment_event_name(serial, seg.index))
    kw = w.bind("kw", {"zenith_ops": ", ".join(f"{op} x{c}" for op, c in sorted(seg.op_counts.items())),
                       "aten_nodes": len(seg.nodes)})
    w.line("if _prof._is_profiler_enabled:")
    w.line(f"with _RF({event}, keyword_values={kw}):", 2)
    args = f"i, {ints}, _slot" if slotted else f"i, {ints}"
    w.line(f"r = {run}({args})", 3)
    w.line("else:")
    w.line(f"r = {run}({args})", 2)


def _nodes_in(a):
    """The fx nodes inside an argument (nested lists, tuples, dicts, slices)."""
    found = []
    torch.fx.node.map_arg(a, found.append)
    return found
