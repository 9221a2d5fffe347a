"""Per-kernel timing of the Zenith runtime.

    with zenith.profile() as p:
        model(x)
    print(p)            # table: op, calls, total ms, share

    with zenith.profile(trace="trace.json"):   # also a Chrome trace (chrome://tracing,
        model(x)                               # ui.perfetto.dev): one slice per kernel call

ZENITH_PROFILE=1 turns it on for the whole process and prints the table at exit;
ZENITH_PROFILE_TRACE=path.json also writes the trace there at exit.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os

from zenith import _C


class Profile:
    def __init__(self):
        self.table = {}  # op -> (calls, seconds)
        self.events = []  # (op, node, graph, thread, start_us, dur_us, out_shape), when tracing
        self.gemm = []  # per event: a GEMM's (M, N, K) (matmul, addmm, addmm_parts, qmatmul; batch in M), else None
        self.dropped = 0  # events past the runtime's limit

    def chrome_trace(self):
        """The events as a Chrome trace (JSON object format): one complete ("X") event
        per kernel call, on the thread that ran it; args name the graph, the node and
        its output shape, and a GEMM's M x N x K (gemm_mnk)."""
        pid = os.getpid()
        events = [{"name": op, "cat": "zenith", "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid,
                   "args": {"graph": graph, "node": node, "out_shape": list(shape),
                            **({"gemm_mnk": list(g)} if g else {})}}
                  for (op, node, graph, tid, ts, dur, shape), g in zip(self.events, self._gemm())]
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"source": "zenith", "dropped_events": self.dropped}}

    def _gemm(self):  # per event, None where a Profile was filled without them
        return self.gemm if len(self.gemm) == len(self.events) else [None] * len(self.events)

    def gemm_rates(self, calls=1):
        """The GEMMs the trace holds (matmul, addmm, addmm_parts, qmatmul), one row per op and
        M x N x K, largest total time first: how many ran per call (of `calls` calls
        traced), the median time of one and its GFLOP/s (2 M N K over that median)."""
        per = {}
        for (op, *_, dur, _), g in zip(self.events, self._gemm()):
            if g:
                per.setdefault((op, g), []).append(dur)
        rows = []
        for (op, (m, n, k)), durs in per.items():
            med = sorted(durs)[len(durs) // 2]
            rows.append({"op": op, "m": m, "n": n, "k": k, "per_call": len(durs) / calls, "median_us": med,
                         "gflops": 2 * m * n * k / med / 1e3 if med > 0 else 0.0, "total_us": sum(durs) / calls})
        return sorted(rows, key=lambda r: -r["total_us"])

    def write_chrome_trace(self, path):
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    def __str__(self):
        total = sum(s for _, s in self.table.values()) or 1e-12
        rows = sorted(self.table.items(), key=lambda kv: -kv[1][1])
        lines = [f"{'op':<22}{'calls':>8}{'total ms':>12}{'share':>8}"]
        for op, (calls, secs) in rows:
            lines.append(f"{op:<22}{calls:>8}{secs * 1e3:>12.2f}{100 * secs / total:>7.1f}%")
        lines.append(f"{'total':<22}{'':>8}{total * 1e3:>12.2f}")
        return "\n".join(lines)


def _start(trace):
    _C.profile_reset()
    _C.profile_trace_enable(trace)
    _C.profile_enable(True)


def _collect(p):
    p.table = dict(_C.profile_snapshot())
    raw = _C.profile_events()
    p.events = [e[:7] for e in raw]
    p.gemm = [tuple(e[7]) if e[7][0] else None for e in raw]
    p.dropped = _C.profile_events_dropped()


@contextlib.contextmanager
def profile(trace=None):
    """Times every Zenith kernel call inside the block; yields a Profile filled on exit.
    trace: a path to write the calls as a Chrome trace JSON (kept in memory until then,
    up to about a million calls)."""
    p = Profile()
    _start(trace is not None)
    try:
        yield p
    finally:
        _C.profile_enable(False)
        _C.profile_trace_enable(False)
        _collect(p)
        if trace is not None:
            p.write_chrome_trace(trace)


def _enable_from_env():
    trace = os.environ.get("ZENITH_PROFILE_TRACE", "")
    if os.environ.get("ZENITH_PROFILE", "") not in ("", "0") or trace:
        _start(bool(trace))

        def report():
            p = Profile()
            _collect(p)
            print("Zenith kernel profile (ZENITH_PROFILE=1)\n" + str(p))
            if trace:
                p.write_chrome_trace(trace)
                print(f"Zenith: Chrome trace of {len(p.events)} kernel calls written to {trace}")

        atexit.register(report)
