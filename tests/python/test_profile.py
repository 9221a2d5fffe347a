"""zenith.profile and ZENITH_PROFILE / ZENITH_PROFILE_TRACE: the per-kernel table and the
Chrome trace report what the runtime ran, no more and no less."""
import copy
import json
import os
import subprocess
import sys

import pytest
import torch

import zenith
from zenith.backend import collect_reports


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 8)).eval()


def test_table_counts_every_kernel_call():
    m, x = _model(), torch.randn(5, 16)
    with torch.no_grad(), collect_reports() as reports:
        c = zenith.compile(m)
        c(x)  # compile outside the profile
        with zenith.profile() as p:
            for _ in range(3):
                c(x)
    ops = reports[0].zenith_ops
    assert p.table and set(p.table) <= set(ops)
    for op, (calls, seconds) in p.table.items():
        assert calls == 3 * ops[op] and seconds > 0, (op, calls, ops)
    assert p.events == []  # no trace asked for
    assert "addmm" in str(p) and "total" in str(p)


def _traced(m, x, path, calls=2):
    """m compiled and called once, then `calls` calls traced into path: the Profile."""
    with torch.no_grad():
        c = zenith.compile(m)
        c(x)
        with zenith.profile(trace=str(path)) as p:
            for _ in range(calls):
                c(x)
    return p


def test_chrome_trace_has_one_slice_per_kernel_call(tmp_path):
    path = tmp_path / "trace.json"
    p = _traced(_model(), torch.randn(5, 16), path)
    doc = json.loads(path.read_text())
    ev = doc["traceEvents"]
    assert len(ev) == sum(calls for calls, _ in p.table.values()) == len(p.events)
    assert doc["otherData"]["dropped_events"] == 0
    assert {e["name"] for e in ev} == set(p.table) and all(e["ph"] == "X" and e["dur"] >= 0 for e in ev)
    # the same timings as the table's, and one calling thread running nodes one after another
    assert abs(sum(e["dur"] for e in ev) - 1e6 * sum(s for _, s in p.table.values())) < 1e-3 * len(ev)
    assert len({e["tid"] for e in ev}) == 1 and len({e["args"]["graph"] for e in ev}) == 1
    for a, b in zip(ev, ev[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3
    first = [e for e in ev if e["name"] == "addmm"]
    assert sorted({tuple(e["args"]["out_shape"]) for e in first}) == [(5, 8), (5, 32)]


def test_env_writes_table_and_trace_at_exit(tmp_path):
    path = tmp_path / "env-trace.json"
    code = ("import torch, zenith\n"
            "f = zenith.compile(lambda x: torch.tanh(x) * 3)\n"
            "with torch.no_grad():\n"
            "    f(torch.randn(4, 4)); f(torch.randn(4, 4))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=dict(os.environ, ZENITH_PROFILE_TRACE=str(path))).stdout
    assert "Zenith kernel profile" in out and "Chrome trace of" in out
    ev = json.loads(path.read_text())["traceEvents"]
    assert len(ev) >= 2 and all(e["ph"] == "X" for e in ev)


def test_torch_profiler_trace_has_the_zenith_segments(tmp_path):
    # A fallback op (i0) splits the graph into two segments: each call shows both as
    # ranges, once each, and the ops inside them are Zenith's (no aten::addmm events).
    m = _model()

    def f(x):
        return m(torch.special.i0(torch.tanh(x) * 2))

    x = torch.randn(5, 16)
    with torch.no_grad(), collect_reports() as reports:
        c = zenith.compile(f)
        torch.testing.assert_close(c(x), f(x), rtol=1e-4, atol=1e-5)
        with torch.profiler.profile() as prof:
            for _ in range(2):
                c(x)
    (r,) = reports
    assert r.segments == 2 and "aten.i0.default" in r.fallback_ops, (r.segments, r.fallback_ops)
    names = [e.name for e in prof.events()]
    segs = sorted({n for n in names if n.startswith("zenith: graph ")})
    assert len(segs) == 2 and [s.rsplit(" ", 1)[1] for s in segs] == ["0", "1"], segs
    assert all(names.count(s) == 2 for s in segs), names
    assert "aten::i0" in names and "aten::addmm" not in names and "aten::mm" not in names
    path = tmp_path / "torch-trace.json"
    prof.export_chrome_trace(str(path))
    traced = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert set(segs) <= traced


def test_gemm_rates_give_each_gemms_shape_and_rate(tmp_path):
    # One row per GEMM's M x N x K (batch dims folded into M), calls of one shape counted
    # together: the three sibling projections, fused into one addmm_parts (fp32) or one
    # qmatmul (int8), are one GEMM, N their sum; the two 32 x 32 layers after them one row.
    class Siblings(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(64, n) for n in (32, 64, 32))
            self.o, self.o2 = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)

        def forward(self, x):
            return self.o(self.q(x)).sum(-1) + self.k(x).sum(-1) + self.o2(self.v(x)).sum(-1)

    torch.manual_seed(0)
    m, x = Siblings().eval(), torch.randn(2, 5, 64)
    path = tmp_path / "trace.json"
    p = _traced(m, x, path)
    rows = p.gemm_rates(calls=2)
    assert sorted((r["op"], r["m"], r["n"], r["k"], r["per_call"]) for r in rows) == [
        ("addmm", 10, 32, 32, 2), ("addmm_parts", 10, 128, 64, 1)], rows
    for r in rows:
        assert r["gflops"] == pytest.approx(2 * r["m"] * r["n"] * r["k"] / r["median_us"] / 1e3)
    traced = [e for e in json.loads(path.read_text())["traceEvents"] if "gemm_mnk" in e["args"]]
    want = [(10, 128, 64), (10, 32, 32), (10, 32, 32)] * 2
    assert sorted(tuple(e["args"]["gemm_mnk"]) for e in traced) == sorted(want)
    assert all(e["name"] in ("addmm", "addmm_parts") for e in traced)
    p.gemm = []  # a Profile filled without them: every event stays, none a GEMM
    assert len(p.chrome_trace()["traceEvents"]) == len(p.events) and p.gemm_rates() == []

    pq = _traced(zenith.quantize(copy.deepcopy(m), "int8-dynamic"), x, os.devnull, calls=1)
    assert sorted((r["op"], r["m"], r["n"], r["k"]) for r in pq.gemm_rates()) == [
        ("qmatmul", 10, 32, 32), ("qmatmul", 10, 128, 64)]
