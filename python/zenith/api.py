"""The public API: compile, explain, stats."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import torch

from zenith import _C
from zenith import backend as _backend
from zenith.options import help_text, resolve
from zenith.partition import STATS
from zenith.quant.quantize import summary as quant_summary


def compile(model, *, dynamic=None, fullgraph=False, mode=None, options=None, **kwargs):  # noqa: A001
    """torch.compile(model, backend="zenith", ...), with Zenith's options checked here
    rather than at the first call. Options are keywords (`zenith.compile(m,
    passes=False)`) or, as torch.compile takes them, a dict (`options={"passes":
    False}`). mode: one of torch.compile's modes. Options (with defaults) and modes:
    """
    opts = _resolve(mode, options, kwargs, "zenith.compile")
    return torch.compile(model, backend=_backend_for(opts), dynamic=dynamic, fullgraph=fullgraph)


compile.__doc__ = compile.__doc__.rstrip(" ") + help_text()


def _resolve(mode, options, kwargs, where):
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"{where}: options must be a dict of option name to value, got {type(options).__name__}")
    both = set(options or ()) & set(kwargs)
    if both:
        raise TypeError(f"{where}: option(s) {', '.join(sorted(both))} given both as keywords and in options=")
    return resolve(mode, {**(options or {}), **kwargs}, where=where)


_BACKENDS = {}  # Options -> backend callable


def _backend_for(opts):
    """One backend callable per set of options: Dynamo guards that a cached graph was
    compiled by the same backend object, so a fresh one per compile() made every model
    compiled separately (instances, deep copies) compile its own graph, and the ninth
    fell back to eager at Dynamo's recompile limit."""
    if opts not in _BACKENDS:
        _BACKENDS[opts] = _backend.make_backend(**dataclasses.asdict(opts))
    return _BACKENDS[opts]


@dataclass
class Report:
    nodes_total: int = 0
    nodes_native: int = 0
    fallback_ops: dict = field(default_factory=dict)
    passes: dict = field(default_factory=dict)
    compile_seconds: float = 0.0
    graphs: int = 0
    segments: int = 0
    zenith_ops: dict = field(default_factory=dict)
    planned_bytes: int = 0  # the runtime's liveness-planned arena for intermediates
    packed_weight_bytes: int = 0  # weights kept packed for the GEMM (pack_weights)
    aten_traces: dict = field(default_factory=dict)  # how graphs reached ATen -> count
    quantized: list = field(default_factory=list)  # zenith.quant.quantize.QuantLayer per quantized layer
    quant_kept: dict = field(default_factory=dict)  # layer -> why zenith.quantize left it in floating point

    def __str__(self):
        lines = [
            "Zenith report",
            f"  graphs compiled   {self.graphs}",
            f"  ATen nodes        {self.nodes_total}",
            f"  run natively      {self.nodes_native}"
            + (f" ({100.0 * self.nodes_native / self.nodes_total:.1f}%)" if self.nodes_total else ""),
            f"  Zenith segments   {self.segments}",
            f"  compile seconds   {self.compile_seconds:.3f}",
            "  traced to ATen    " + (", ".join(f"{k} x{v}" for k, v in sorted(self.aten_traces.items())) or "-"),
            f"  planned arena     {self.planned_bytes / 2**20:.2f} MiB (intermediates, after memory reuse)",
            f"  packed weights    {self.packed_weight_bytes / 2**20:.2f} MiB (kept packed after the first call)",
            "  passes            " + (", ".join(f"{k}: {v}" for k, v in self.passes.items()) or "-"),
        ]
        if self.fallback_ops:
            lines.append("  fallbacks to PyTorch:")
            w = max(len(k) for k in self.fallback_ops)
            for k, e in sorted(self.fallback_ops.items()):
                lines.append(f"    {k:<{w}}  x{e['count']:<4} {e['reason']}")
        else:
            lines.append("  fallbacks to PyTorch: none")
        if self.zenith_ops:
            top = sorted(self.zenith_ops.items(), key=lambda kv: -kv[1])
            lines.append("  Zenith ops: " + ", ".join(f"{k} x{v}" for k, v in top))
        lines += self._quant_lines()
        return "\n".join(lines)

    def _quant_lines(self, listed=16):
        if not self.quantized and not self.quant_kept:
            return []
        mib = 2.0**20
        by_format = {}
        for q in self.quantized:
            n, b, f = by_format.get(q.format, (0, 0, 0))
            by_format[q.format] = (n + 1, b + q.bytes, f + q.fp32_bytes)
        qbytes, fbytes = sum(q.bytes for q in self.quantized), sum(q.fp32_bytes for q in self.quantized)
        lines = [f"  quantized layers  {len(self.quantized)}: {qbytes / mib:.2f} MiB of weights, "
                 f"{(fbytes - qbytes) / mib:.2f} MiB saved against fp32"]
        for fmt, (n, b, f) in by_format.items():
            lines.append(f"    {fmt:<11} x{n:<4} {b / mib:8.2f} MiB (fp32 {f / mib:.2f} MiB)")
        if len(self.quantized) <= listed:
            for q in self.quantized:
                acts = q.activations + (f" x_scale {q.x_scale:.4g}" if q.x_scale is not None else "") + (
                    " smoothed" if q.smoothed else "") + (f" error {q.error:.2e}" if q.error is not None else "")
                fmt = q.format + (" (7-bit codes)" if q.weight_bits == 7 else "")
                lines.append(f"    {q.name}: {q.kind}, {fmt}, activations {acts}, "
                             f"{(q.fp32_bytes - q.bytes) / mib:.3f} MiB saved")
        else:
            lines.append(f"    (each layer: report.quantized, {len(self.quantized)} entries)")
        for name, why in self.quant_kept.items():
            lines.append(f"    kept in floating point: {name}: {why}")
        return lines


def explain(model, *example_inputs, dynamic=None, mode=None, options=None, **kwargs):
    """Compiles `model` with Zenith (options and mode as for `compile`), runs it once on
    `example_inputs`, and reports what ran natively, what fell back (and why) and what
    the passes changed."""
    opts = _resolve(mode, options, kwargs, "zenith.explain")
    with _backend.collect_reports() as sink:
        t0 = time.perf_counter()
        # a backend of its own: Dynamo compiles (and so reports) even where compile()'s
        # shared backend has a graph cached for this code
        compiled = torch.compile(model, backend=_backend.make_backend(**dataclasses.asdict(opts)), dynamic=dynamic)
        with torch.no_grad():
            compiled(*example_inputs)
        total = time.perf_counter() - t0
    r = Report(graphs=len(sink), compile_seconds=total)
    module = model if isinstance(model, torch.nn.Module) else getattr(model, "__self__", None)  # a bound forward
    if isinstance(module, torch.nn.Module):
        q = quant_summary(module)
        r.quantized, r.quant_kept = q.layers, q.kept
    for g in sink:
        r.nodes_total += g.nodes_total
        r.nodes_native += g.nodes_native
        r.segments += g.segments
        r.planned_bytes += g.planned_bytes
        r.packed_weight_bytes += g.packed_weight_bytes
        r.aten_traces[g.aten_trace] = r.aten_traces.get(g.aten_trace, 0) + 1
        for k, v in g.passes.items():
            r.passes[k] = r.passes.get(k, 0) + v
        for k, v in g.zenith_ops.items():
            r.zenith_ops[k] = r.zenith_ops.get(k, 0) + v
        for k, e in g.fallback_ops.items():
            d = r.fallback_ops.setdefault(k, {"count": 0, "reason": e["reason"]})
            d["count"] += e["count"]
    return r


def stats():
    """Process-wide counters: graphs_compiled, nodes_native, nodes_fallback, calls,
    segments_run (Zenith runtime invocations), fallback_node_runs."""
    return dict(STATS)


def reset_stats():
    for k in STATS:
        STATS[k] = 0


def empty_cache():
    """Frees the buffers of earlier calls' outputs that Zenith keeps for reuse, and returns
    how many bytes that was. A graph's outputs (a training step's gradients and saved
    activations) go back to this cache when PyTorch frees them, so that the next call of
    the same sizes reuses their pages instead of faulting fresh ones in; it holds at most
    ZENITH_OUTPUT_CACHE_MB (default 512; 0 turns it off)."""
    return _C.release_buffer_cache()
