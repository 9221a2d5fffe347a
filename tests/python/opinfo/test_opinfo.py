"""PyTorch's OpInfo samples against Zenith (issue 18, "Trust").

Selection: every OpInfo in op_db whose samples reach an ATen op the importer claims
(a CONVERTERS key, after Zenith's decomposition table): those whose aten_name or name
is the overload packet of a claimed op, and, for the rest, those whose first sample
(first supported dtype), traced by make_fx, contains a claimed op. Every sample of
every selected OpInfo runs, for every dtype of float32, float16, bfloat16, int64,
int32 and bool it supports on CPU: traced, compiled by Zenith (passes and verifier
on), compared with eager (opinfo_worker.run_sample). An op Zenith does not claim falls
back to PyTorch and must match all the same.

Graphs are traced functionalized, as the backend does (opinfo_worker.trace). Samples
whose eager call raises, or that make_fx cannot trace (data-dependent shapes), are
skipped and counted by reason. Deliberate differences from eager, each counted:
- ops with nondeterministic output (OpInfo.has_nondeterministic_output: empty and
  friends, uninitialized memory): shapes and dtypes compared, not values;
- graphs with a random op (tagged nondeterministic_seeded) run after the seed eager ran
  with (OpInfo's wrapper_set_seed: 42); where their values still differ, a decomposition
  draws the random numbers in another order (dropout as rand < p where eager calls
  bernoulli_), and shapes and dtypes are compared;
- float outputs outside harness.TOL of eager (opinfo_worker.arbiter), accepted when
  "float64 arbiter": Zenith's worst error against a float64 run of the op, in units of
  the dtype's tolerance, is at most eager's worst plus one unit (Zenith is as exact as
  eager: binary_cross_entropy_with_logits in bfloat16, whose eager kernel is no nearer
  float64 than the traced decomposition Zenith runs); or
  "ill-conditioned": Zenith differs from eager by no more than eager's own result
  moves when its inputs move by one rounding (multi_head_attention_forward with
  scores in the thousands, where GEMMs summing in another order differ by a few ulp
  and the softmax magnifies it; op by op Zenith is as near float64 as eager).

Samples run in worker subprocesses (ZENITH_OPINFO_WORKERS, default 2), each streaming
one result line per sample; a worker that dies (a signal) or hangs costs the sample it
was on, recorded as a crash failure, and a new worker resumes after it.

Standalone: python tests/python/opinfo/test_opinfo.py [--ops name,...] [--workers N]
"""
from __future__ import annotations

import collections
import json
import os
import queue
import select as _select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "opinfo_worker.py"
SAMPLE_TIMEOUT = float(os.environ.get("ZENITH_OPINFO_SAMPLE_TIMEOUT", "120"))


class Worker:
    """One worker subprocess speaking opinfo_worker's protocol."""

    def __init__(self):
        env = dict(os.environ, OMP_NUM_THREADS="1", ZENITH_OPINFO_THREADS="1", PYTHONFAULTHANDLER="1")
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen([sys.executable, str(WORKER), "--serve"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, env=env, text=True, bufsize=1)
        self.buf = ""

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()

    def recv(self, timeout):
        """The next reply, or None if the worker died or went quiet for `timeout` s."""
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while "\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = _select.select([fd], [], [], left)
            if not r:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk.decode()
        line, self.buf = self.buf.split("\n", 1)
        return json.loads(line)

    def death(self):
        """Why the worker stopped, and the tail of its stderr."""
        try:
            self.p.kill()
        except OSError:
            pass
        rc = self.p.wait()
        self.err.seek(0)
        tail = [ln for ln in self.err.read().decode(errors="replace").splitlines() if ln.strip()][-6:]
        self.err.close()
        what = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        return what, " | ".join(tail)[-600:]

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:  # noqa: BLE001
            self.p.kill()
            self.p.wait()
        self.err.close()


def _pool(jobs, handle, workers):
    """Runs jobs on `workers` threads, each driving one worker subprocess; handle(w, job)
    returns a replacement worker when it had to kill or lose its own."""
    q = queue.Queue()
    for j in jobs:
        q.put(j)
    errors = []

    def loop():
        w = Worker()
        try:
            while True:
                try:
                    job = q.get_nowait()
                except queue.Empty:
                    return
                w = handle(w, job)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            w.close()

    threads = [threading.Thread(target=loop) for _ in range(min(workers, len(jobs)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def select_ops(db, workers, op_filter=None):
    """(index, key, dtypes, claimed-by) of every selected OpInfo, and the keys of those
    whose first sample make_fx cannot trace."""
    sys.path.insert(0, str(HERE))
    import opinfo_worker as W

    packets = W.claimed_packets()
    named, rest = [], []
    for i, op in enumerate(db):
        if op_filter and W.op_key(op) not in op_filter and op.name not in op_filter:
            continue
        (named if op.aten_name in packets or op.name in packets else rest).append(i)
    reached = {}
    chunks = [c for c in (rest[k::workers * 4] for k in range(workers * 4)) if c]

    def handle(w, chunk):
        w.send({"cmd": "select", "ops": chunk})
        for _ in chunk:
            r = w.recv(SAMPLE_TIMEOUT * 4)
            if r is None:
                raise RuntimeError(f"worker died while selecting ops: {w.death()}")
            reached[r["op"]] = r["claimed"]
        return w

    _pool(chunks, handle, workers)
    out = []
    for i, op in enumerate(db):
        why = "name" if i in named else ("trace: " + ", ".join(reached.get(i) or []))
        if (i in named or reached.get(i)) and (not op_filter or W.op_key(op) in op_filter or op.name in op_filter):
            out.append((i, W.op_key(op), W.supported_dtypes(op), why))
    return out, sorted(W.op_key(db[i]) for i in rest if reached.get(i, []) is None)


def run_all(op_filter=None, workers=None, log=print, progress=None, dtypes=None):
    """Runs every selected sample; returns (summary dict, list of failure records)."""
    workers = workers or int(os.environ.get("ZENITH_OPINFO_WORKERS", str(min(2, os.cpu_count() or 1))))
    t0 = time.monotonic()
    from torch.testing._internal.common_methods_invocations import op_db

    db = list(op_db)
    sel, untraceable = select_ops(db, workers, op_filter)
    t_sel = time.monotonic() - t0
    # Big ops first (max_pool2d has 1440 samples a dtype) so the two workers end together.
    weight = {"nn.functional.max_pool2d": 100}
    jobs = [(i, key, dt) for i, key, dts, _ in sel for dt in dts if not dtypes or dt in dtypes]
    jobs.sort(key=lambda j: -weight.get(j[1], 1))
    results = []  # (key, dtype, record)
    lock = threading.Lock()
    finished = []

    def handle(w, job):
        i, key, dt = job
        start = 0
        deaths_in_a_row = 0
        while True:
            w.send({"cmd": "run", "op": i, "dtype": dt, "start": start})
            while True:
                r = w.recv(SAMPLE_TIMEOUT)
                if r is None:  # died or hung on sample `start`: record it, resume after it
                    what, tail = w.death()
                    deaths_in_a_row += 1
                    if deaths_in_a_row > 3:  # dies before any sample (making them, say): give up the job
                        with lock:
                            results.append((key, dt, {"i": start, "st": "fail", "why": "crash",
                                                      "err": f"worker died {deaths_in_a_row} times in a row "
                                                             f"without a result; stderr: {tail}"}))
                            finished.append(job)
                        return Worker()
                    rec = {"i": start, "st": "fail", "why": "crash", "err": f"worker {what} (timeout "
                           f"{SAMPLE_TIMEOUT:.0f}s per sample); stderr: {tail}"}
                    with lock:
                        results.append((key, dt, rec))
                    w = Worker()
                    start += 1
                    break
                if "done" in r:
                    with lock:
                        finished.append(job)
                        if progress:
                            progress(f"[{len(finished)}/{len(jobs)} {time.monotonic() - t0:.0f}s] {key} {dt}: "
                                     f"{r['done']} samples")
                    return w
                with lock:
                    results.append((key, dt, r))
                deaths_in_a_row = 0
                start = r["i"] + 1

    _pool(jobs, handle, workers)
    wall = time.monotonic() - t0
    summary = summarize(sel, results, wall, t_sel, workers, untraceable)
    fails = [(k, d, r) for k, d, r in results if r["st"] == "fail"]
    for line in summary["lines"]:
        log(line)
    return summary, fails


def summarize(sel, results, wall, t_sel, workers, untraceable):
    st = collections.Counter(r["st"] for _, _, r in results)
    per_dtype = collections.Counter(d for _, d, r in results if r["st"] != "skip")
    skips = collections.Counter(r["why"] for _, _, r in results if r["st"] == "skip")
    notes = collections.Counter(r["note"] for _, _, r in results if r.get("note"))
    fallback = collections.Counter()
    for _, _, r in results:
        for name, reason in (r.get("fallback") or {}).items():
            fallback[(name, reason)] += 1
    ops_run = {k for k, _, r in results if r["st"] != "skip"}
    import torch
    from zenith.importer import CONVERTERS

    claimed = {str(t) for t in CONVERTERS if isinstance(t, torch._ops.OpOverload)}
    reached = collections.Counter(c for _, _, r in results for c in r.get("claimed") or [])
    unreached = sorted(claimed - set(reached))
    lines = [
        f"OpInfo vs Zenith: {len(sel)} OpInfos selected ({sum(1 for s in sel if s[3] == 'name')} by name, the rest "
        f"by a trace of their first sample), {len(ops_run)} with samples run; {len(results)} samples, "
        f"{wall:.0f} s wall ({t_sel:.0f} s selecting) on {workers} worker(s)",
        "samples run per dtype: " + ", ".join(f"{d} {n}" for d, n in sorted(per_dtype.items())),
        f"fully native {st['native']}, partly fallback {st['partial']}, all fallback {st['fallback']}, "
        f"no op in the graph {st['empty']}, skipped {st['skip']}, failed {st['fail']}",
        f"claimed ATen overloads in the samples' graphs: {len(claimed) - len(unreached)} of {len(claimed)}; "
        f"in none: {', '.join(unreached)}",
        "skipped by reason: " + (", ".join(f"{w} {n}" for w, n in skips.most_common()) or "none"),
        "compared by a deliberate rule: " + (", ".join(f"{w} {n}" for w, n in notes.most_common()) or "none"),
        f"not selected, first sample untraceable by make_fx ({len(untraceable)}): " + ", ".join(untraceable),
        "fallbacks (op: reason, samples): " + "; ".join(f"{n}: {r} ({c})" for (n, r), c in fallback.most_common(25)),
    ]
    return {"selected": len(sel), "samples": len(results), "status": dict(st), "per_dtype": dict(per_dtype),
            "skips": dict(skips), "notes": dict(notes), "wall": wall, "lines": lines}


def format_failures(fails, limit=400):
    out = []
    for key, dt, r in sorted(fails, key=lambda f: (f[0], f[1], f[2]["i"])):
        out.append(f"{key} {dt} sample {r['i']} [{r.get('desc', '?')}]: {r['why']}: {r.get('err', '')}")
    if len(out) > limit:
        out = out[:limit] + [f"... and {len(out) - limit} more"]
    return "\n".join(out)


def test_a_crash_costs_one_sample(monkeypatch):
    """A worker killed by a signal on one sample: that sample is a crash failure, the
    samples after it still run (in a new worker)."""
    monkeypatch.setenv("ZENITH_OPINFO_CRASH", "add:float32:3")
    summary, fails = run_all({"add"}, workers=1, log=lambda line: None, dtypes={"float32"})
    assert [(k, d, r["i"], r["why"]) for k, d, r in fails] == [("add", "float32", 3, "crash")], fails
    assert "signal 11" in fails[0][2]["err"]
    ran = summary["samples"]
    assert ran > 4 and summary["status"].get("native", 0) == ran - 1, summary["lines"]


def test_opinfo_samples_match_eager(capsys):
    summary, fails = run_all()
    with capsys.disabled():
        print()
        for line in summary["lines"]:
            print(line)
    assert summary["selected"] > 100 and summary["samples"] > 10000, summary["lines"]
    assert not fails, f"{len(fails)} OpInfo samples fail:\n" + format_failures(fails)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant)")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--json", help="write every failure record here")
    a = ap.parse_args()
    summary, fails = run_all(set(a.ops.split(",")) if a.ops else None, a.workers,
                             progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(format_failures(fails, limit=10**9))
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "fails": fails}, indent=1))
    sys.exit(1 if fails else 0)
