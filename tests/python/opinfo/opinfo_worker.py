"""Runs PyTorch OpInfo samples through Zenith, one result line per sample.

Used by test_opinfo.py, which starts it as a subprocess so that a crash (a signal
from the C++ core) costs one sample, not the run. Also a debugging tool:

    python tests/python/opinfo/opinfo_worker.py --op index_select --dtype float32 [--sample 3] [-v]

Each sample: its tensors become the inputs of a make_fx trace (fake tensors, Zenith's
decomposition table, as tests/python/ops/harness.py and the backend do), the ATen
graph is compiled by partition.CompiledGraph with passes and the verifier on, run,
and compared with eager: the same output structure, exactly the same shapes and
dtypes, values within harness.TOL (equal_nan).

Protocol (--serve): requests on stdin, one JSON object a line; replies on stdout,
one JSON object a line (everything else the process prints goes to stderr):
  {"cmd": "select", "ops": [index, ...]}  -> one {"op": index, "claimed": [...]} per op
  {"cmd": "run", "op": index, "dtype": "float32", "start": k}
      -> {"i": k, "st": status, ...} per sample from k, then {"done": n_samples}
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
import warnings
from pathlib import Path

DTYPE_NAMES = ["float32", "float16", "bfloat16", "int64", "int32", "bool"]


def _setup_paths():
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here.parent / "ops"))  # harness.TOL


_setup_paths()

import torch  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

from harness import TOL  # noqa: E402
from zenith import importer  # noqa: E402
from zenith.partition import CompiledGraph  # noqa: E402


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def op_key(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def claimed_packets():
    """Names of the ATen overload packets some CONVERTERS key belongs to."""
    return {k.overloadpacket.__name__ for k in importer.CONVERTERS if isinstance(k, torch._ops.OpOverload)}


def claimed_in_graph(gm):
    """The claimed ATen overloads (CONVERTERS keys) among a graph's nodes."""
    return sorted({str(n.target) for n in gm.graph.nodes
                   if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
                   and n.target in importer.CONVERTERS})


def supported_dtypes(op):
    sup = op.supported_dtypes("cpu")
    return [d for d in DTYPE_NAMES if getattr(torch, d) in sup]


# ------------------------------------------------------------------ samples
def samples_of(op, dtype):
    """Every sample, materialized up front from a fixed seed, so that a restarted
    worker sees the same list and sample k is the same sample in both."""
    torch.manual_seed(0)
    import random

    random.seed(0)
    try:
        import numpy as np

        np.random.seed(0)
    except ImportError:
        pass
    return list(op.sample_inputs("cpu", getattr(torch, dtype), requires_grad=False))


class Flat:
    """A sample as a flat list of leaves: tensors become graph inputs, everything
    else is a constant baked into the trace."""

    def __init__(self, op, sample):
        self.op = op
        self.leaves, self.spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        self.tidx = [i for i, x in enumerate(self.leaves) if isinstance(x, torch.Tensor)]

    def tensors(self):
        return [self.leaves[i] for i in self.tidx]

    def fn(self, *ts):
        leaves = list(self.leaves)
        for i, t in zip(self.tidx, ts):
            leaves[i] = t
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op.op(inp, *args, **kwargs)

    def call(self, ts, seed):
        torch.manual_seed(seed)
        return self.fn(*ts)


def clone_all(ts):
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in ts]


def short(x, limit=60):
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}" + ("" if x.is_contiguous() else "(nc)")
    if isinstance(x, (list, tuple)):
        inner = ", ".join(short(y, limit) for y in x)
        return ("[" + inner + "]") if isinstance(x, list) else ("(" + inner + (",)" if len(x) == 1 else ")"))
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}={short(v, limit)}" for k, v in x.items()) + "}"
    r = repr(x)
    return r if len(r) <= limit else r[:limit] + "..."


def describe(sample):
    d = short(sample.input)
    if sample.args:
        d += ", " + ", ".join(short(a) for a in sample.args)
    if sample.kwargs:
        d += ", " + ", ".join(f"{k}={short(v)}" for k, v in sample.kwargs.items())
    return d if len(d) <= 300 else d[:300] + "..."


def trace(fn, tensors):
    """The ATen graph Zenith compiles, functionalized as the backend does it (the
    compiler takes functional graphs): make_fx of torch.func.functionalize(fn) on fake
    tensors with Zenith's decompositions (backend._direct_inference); where that leaves
    a mutable op (writes into views of a new_empty, say, from Python decompositions),
    the backend hands the graph to AOTAutograd, whose Python functionalization
    (dispatch_functionalize) this then uses. Samples compare outputs only."""
    from torch._subclasses.functional_tensor import dispatch_functionalize

    dec = importer.decomposition_table()
    gm = make_fx(torch.func.functionalize(fn), tracing_mode="fake", decomposition_table=dec)(*tensors)
    if any(n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
           for n in gm.graph.nodes):
        gm = make_fx(dispatch_functionalize(fn), tracing_mode="fake", decomposition_table=dec)(*tensors)
    return gm


# ------------------------------------------------------------------ comparison
class Mismatch(Exception):
    pass


def _is_float(t):
    return t.dtype.is_floating_point


def compare(got, want, values=True):
    """Same structure, same shapes and dtypes, close values. Raises Mismatch."""
    gl, gs = pytree.tree_flatten(got)
    wl, ws = pytree.tree_flatten(want)
    if len(gl) != len(wl):
        raise Mismatch(f"{len(gl)} outputs, eager has {len(wl)}")
    bad = []
    for k, (g, w) in enumerate(zip(gl, wl)):
        if isinstance(w, torch.Tensor) != isinstance(g, torch.Tensor):
            raise Mismatch(f"output {k}: {type(g).__name__}, eager gives {type(w).__name__}")
        if not isinstance(w, torch.Tensor):
            if not (g == w or (isinstance(g, float) and isinstance(w, float) and math.isnan(g) and math.isnan(w))):
                raise Mismatch(f"output {k}: {g!r}, eager gives {w!r}")
            continue
        if g.shape != w.shape:
            raise Mismatch(f"output {k}: shape {list(g.shape)}, eager {list(w.shape)}")
        if g.dtype != w.dtype:
            raise Mismatch(f"output {k}: dtype {g.dtype}, eager {w.dtype}")
        if not values:
            continue
        try:
            torch.testing.assert_close(g, w, equal_nan=True, **TOL.get(w.dtype, dict(rtol=0, atol=0)))
        except AssertionError as e:
            bad.append((k, str(e)))
    return bad


def _tol_units(x, ref, dtype):
    """Each element's distance from ref in units of the dtype's tolerance."""
    tol = TOL[dtype]
    x, ref = x.double(), ref.double()
    d = (x - ref).abs()
    d = torch.where((x == ref) | (x.isnan() & ref.isnan()), torch.zeros_like(d), d)  # equal infinities, NaNs
    return d / (tol["atol"] + tol["rtol"] * ref.abs().nan_to_num(posinf=0.0))


def as_close_to_float64(z, e, r, dtype):
    """Zenith's worst error against the float64 result, in units of the dtype's
    tolerance, is at most eager's worst plus one unit: as exact as eager. (Worst over the
    tensor, not element by element: which of two roundings lands nearer differs from
    element to element.) NaN where float64 is finite counts as infinitely far."""
    if z.numel() == 0:
        return True
    # Where eager or float64 is not finite there is no error to compare: Zenith must give
    # eager's or float64's value there (a NaN or inf in eager must not excuse the rest).
    finite = e.double().isfinite() & r.double().isfinite()
    same = lambda a, b: (a.double() == b.double()) | (a.isnan() & b.isnan())  # noqa: E731
    if not bool((finite | same(z, e) | same(z, r)).all()):
        return False
    if not bool(finite.any()):
        return True
    ez = _tol_units(z, r, dtype).nan_to_num(nan=math.inf)[finite]
    ee = _tol_units(e, r, dtype)[finite]
    return bool(ez.max() <= ee.max() + 1)


def within_rounding_spread(flat, ts, z, e, k, dtype):
    """An ill-conditioned sample: Zenith's value differs from eager's by no more than
    eager's own result moves (plus the tolerance) when its floating inputs move by one
    rounding (relative eps, random signs, three draws). Zenith rounds intermediates in
    another order (its GEMM sums differently), which such a sample magnifies past any
    fixed tolerance (multi-head attention with scores in the thousands)."""
    g = torch.Generator().manual_seed(0)
    spread = torch.zeros(e.shape, dtype=torch.float64)
    for _ in range(3):
        moved = []
        for t in clone_all(ts):
            if isinstance(t, torch.Tensor) and _is_float(t):
                sign = torch.randint(0, 2, t.shape, generator=g) * 2 - 1
                t = (t.double() * (1 + torch.finfo(t.dtype).eps * sign)).to(t.dtype)
            moved.append(t)
        try:
            out = pytree.tree_flatten(flat.call(moved, 0))[0][k]
        except Exception:  # noqa: BLE001
            return False
        if not isinstance(out, torch.Tensor) or out.shape != e.shape:
            return False
        spread = torch.maximum(spread, (out.double() - e.double()).abs().nan_to_num(nan=0.0))
    tol = TOL[dtype]
    d = (z.double() - e.double()).abs()
    ok = d <= tol["atol"] + tol["rtol"] * e.double().abs() + spread
    ok |= (z == e) | (z.isnan() & e.isnan())
    return bool(ok.all())


def arbiter(flat, ts, got, want, bad):
    """Float outputs outside the tolerance of eager: accepted if Zenith is as close to a
    float64 run of the op as eager is (as_close_to_float64), or the sample is so
    ill-conditioned that rounding noise explains the difference (within_rounding_spread).
    Returns (None, note) when every differing output passes, else (reason, None)."""
    gl, _ = pytree.tree_flatten(got)
    wl, _ = pytree.tree_flatten(want)
    if not all(_is_float(wl[k]) for k, _ in bad):
        return "non-float output differs", None
    up = [t.double() if isinstance(t, torch.Tensor) and _is_float(t) else t for t in clone_all(ts)]
    try:
        rl, _ = pytree.tree_flatten(flat.call(up, 0))
    except Exception as e:  # noqa: BLE001
        rl = None
    note = "float64 arbiter"
    for k, _ in bad:
        r = rl[k] if rl is not None and len(rl) == len(wl) else None
        if isinstance(r, torch.Tensor) and r.shape == wl[k].shape and as_close_to_float64(gl[k], wl[k], r, wl[k].dtype):
            continue
        if within_rounding_spread(flat, ts, gl[k], wl[k], k, wl[k].dtype):
            note = "ill-conditioned"
            continue
        return "further from float64 than eager, beyond rounding noise", None
    return None, note


# ------------------------------------------------------------------ one sample
def fallback_summary(cg):
    return {name: e["reason"][:120] for name, e in cg.report.fallback_ops.items()}


def run_sample(op, sample, index):
    """The result record of one sample (a dict with "st" and details)."""
    rec = {"i": index}
    flat = Flat(op, sample)
    ts = flat.tensors()
    seed = 1234 + index
    # 1. eager
    try:
        want = flat.call(clone_all(ts), seed)
    except Exception as e:  # noqa: BLE001
        rec.update(st="skip", why="eager raises", err=f"{type(e).__name__}: {str(e)[:200]}")
        return rec
    # 2. trace
    try:
        torch.manual_seed(seed)
        gm = trace(flat.fn, clone_all(ts))
    except Exception as e:  # noqa: BLE001
        # a sample make_fx can trace without Zenith's decompositions but not with them:
        # the decomposition table is at fault, which is a failure, not a skip
        try:
            torch.manual_seed(seed)
            make_fx(torch.func.functionalize(flat.fn), tracing_mode="fake")(*clone_all(ts))
            rec.update(st="fail", why="trace", err=f"only with Zenith's decompositions: {type(e).__name__}: "
                       f"{str(e).splitlines()[0][:200] if str(e) else ''}")
        except Exception:  # noqa: BLE001
            rec.update(st="skip", why=f"make_fx: {type(e).__name__}", err=str(e).split("\n")[0][:200])
        return rec
    rec["claimed"] = claimed_in_graph(gm)
    random_op = any(isinstance(n.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in n.target.tags
                    for n in gm.graph.nodes if n.op == "call_function")
    # 3. compile and run
    stage = "compile"
    try:
        cg = CompiledGraph(gm, {"passes": True, "verify": True})
        r = cg.report
        rec["fallback"] = fallback_summary(cg)
        rec["native"] = [r.nodes_native, r.nodes_total]
        stage = "run"
        # OpInfo's random ops seed themselves (wrapper_set_seed: 42) when called, which
        # the trace does not keep: the compiled graph draws after that same seed.
        torch.manual_seed(42 if "wrapper_set_seed" in getattr(getattr(op.op, "__code__", None), "co_names", ())
                          else seed)
        got = cg(clone_all(ts))
    except Exception as e:  # noqa: BLE001
        rec.update(st="fail", why=f"{stage} error", err=f"{type(e).__name__}: {str(e).strip()[:400]}",
                   desc=describe(sample))
        return rec
    # 4. compare
    values = not op.has_nondeterministic_output  # uninitialized memory (empty*): shapes and dtypes only
    try:
        bad = compare(got, want, values)
    except Mismatch as e:
        rec.update(st="fail", why="mismatch", err=str(e), desc=describe(sample))
        return rec
    if bad:
        if random_op:  # shapes and dtypes matched above; a decomposition may draw in another order
            rec["note"] = "random"
        elif (verdict := arbiter(flat, ts, got, want, bad))[0] is None:
            rec["note"] = verdict[1]
        else:
            why = verdict[0]
            k, msg = bad[0]
            msg = " ".join(msg.split())
            rec.update(st="fail", why="mismatch", err=f"output {k} ({why}): {msg[:400]}", desc=describe(sample))
            return rec
    n_native, n_total = rec["native"]
    if n_total == 0:
        rec["st"] = "empty"  # the graph has no op (the result is an input, say): nothing to compile
    else:
        rec["st"] = "native" if n_native == n_total else ("fallback" if n_native == 0 else "partial")
    return rec


def select(op):
    """The claimed ATen ops the op's first sample (first supported dtype) reaches; None
    if that sample cannot be traced (data-dependent shapes: Dynamo would break the graph
    there, so no Zenith graph holds the op)."""
    dts = supported_dtypes(op)
    if not dts:
        return []
    try:
        samples = samples_of(op, dts[0])
        if not samples:
            return []
        flat = Flat(op, samples[0])
        torch.manual_seed(0)
        gm = trace(flat.fn, clone_all(flat.tensors()))
    except Exception:  # noqa: BLE001
        return None
    return claimed_in_graph(gm)


# ------------------------------------------------------------------ entry points
def serve():
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints (PyTorch, Zenith's logs) go to stderr, not into the protocol
    sys.stdout = sys.stderr
    db = op_db()

    def send(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "select":
            for i in req["ops"]:
                send({"op": i, "claimed": select(db[i])})
        elif req["cmd"] == "run":
            op = db[req["op"]]
            try:
                samples = samples_of(op, req["dtype"])
            except Exception as e:  # noqa: BLE001
                send({"i": 0, "st": "skip", "why": "sample_inputs raises", "err": f"{type(e).__name__}: {e}"[:200]})
                send({"done": 0})
                continue
            crash = os.environ.get("ZENITH_OPINFO_CRASH")  # "key:dtype:index", test_opinfo's own test
            for k in range(req["start"], len(samples)):
                if crash == f"{op_key(op)}:{req['dtype']}:{k}":
                    import signal

                    os.kill(os.getpid(), signal.SIGSEGV)
                try:
                    rec = run_sample(op, samples[k], k)
                except Exception as e:  # noqa: BLE001  (a bug in this file, not in Zenith: still report it)
                    rec = {"i": k, "st": "fail", "why": "harness error",
                           "err": f"{type(e).__name__}: {e}"[:300], "desc": describe(samples[k])}
                send(rec)
            send({"done": len(samples)})
        else:
            send({"error": f"unknown command {req['cmd']}"})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--serve", action="store_true", help="the test's worker protocol on stdin/stdout")
    p.add_argument("--op", help="OpInfo name[.variant]")
    p.add_argument("--dtype", action="append", help="dtype name (default: every supported one)")
    p.add_argument("--sample", type=int, action="append", help="sample index (default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every sample, and tracebacks")
    a = p.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("ZENITH_OPINFO_THREADS", "1")))
    warnings.filterwarnings("ignore")
    if a.serve:
        return serve()
    ops = [op for op in op_db() if op_key(op) == a.op or (a.op is None)]
    if not ops:
        sys.exit(f"no OpInfo named {a.op}")
    for op in ops:
        print(f"{op_key(op)}: claimed ops reached by its first sample: {select(op)}")
        for dt in a.dtype or supported_dtypes(op):
            samples = samples_of(op, dt)
            for k, s in enumerate(samples):
                if a.sample and k not in a.sample:
                    continue
                try:
                    rec = run_sample(op, s, k)
                except Exception:  # noqa: BLE001
                    traceback.print_exc()
                    continue
                if a.verbose or rec["st"] == "fail":
                    print(dt, json.dumps(rec))
                    if a.verbose:
                        print("   ", describe(s))


if __name__ == "__main__":
    main()
