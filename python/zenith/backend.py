"""The torch.compile backend: Dynamo graph -> AOTAutograd -> Zenith.

AOTAutograd turns Dynamo's graph into ATen graphs (an inference graph, or a
forward/backward pair when gradients are needed); each goes through
partition.CompiledGraph, so the same path carries inference and training.
"""
from __future__ import annotations

import contextlib
import functools

import torch
from torch._dynamo.backends.common import aot_autograd

from zenith.importer import decomposition_table
from zenith.partition import CompiledGraph

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


def _compile_fx(gm, example_inputs, options):
    compiled = CompiledGraph(gm, options)
    for sink in _REPORT_SINKS:
        sink.append(compiled.report)
    return compiled


def make_backend(**options):
    """A backend callable with Zenith options (passes=True, verify=False, fallback=True,
    pack_weights=True)."""
    compiler = functools.partial(_compile_fx, options=options)
    # Inference graphs (no gradients needed) may treat parameters as constants.
    inference = functools.partial(_compile_fx, options={**options, "inference": True})
    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler, inference_compiler=inference,
                        decompositions=decomposition_table)


def zenith_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The backend registered as "zenith" (default options)."""
    return make_backend()(gm, example_inputs, **kwargs)
