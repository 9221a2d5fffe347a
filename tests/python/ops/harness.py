"""Op-test harness in the spirit of ggml's test-backend-ops: one small declaration
per case, traced to ATen (as AOTAutograd would), lowered through Zenith's importer
and run by the C++ runtime, then compared with eager PyTorch. A case also asserts
that every ATen node ran natively and that the Zenith ops it claims to cover were
really in the compiled graph, so a silent fallback cannot make it pass."""
from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from zenith.importer import decomposition_table
from zenith.partition import CompiledGraph

TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.int64: dict(rtol=0, atol=0),
    torch.int32: dict(rtol=0, atol=0),
    torch.bool: dict(rtol=0, atol=0),
}


def compile_fn(fn, inputs, passes=False):
    def wrapped(*args):  # a fixed-arity signature, whatever fn's defaults are
        return fn(*args)

    gm = make_fx(wrapped, tracing_mode="fake", decomposition_table=decomposition_table())(*inputs)
    return CompiledGraph(gm, {"passes": passes, "verify": True})


def check(fn, inputs, covers=(), tol=None, passes=False, native=True):
    cg = compile_fn(fn, inputs, passes=passes)
    r = cg.report
    if native:
        assert r.nodes_native == r.nodes_total, f"fell back: {r.fallback_ops}"
        for op in covers:
            assert op in r.zenith_ops, f"{op} not in the compiled graph: {r.zenith_ops}"
    got = cg(list(inputs))
    want = fn(*inputs)
    got_l = list(got) if isinstance(got, (list, tuple)) else [got]
    want_l = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        t = tol or TOL[w.dtype]
        torch.testing.assert_close(g, w, equal_nan=True, **t)
    return cg
