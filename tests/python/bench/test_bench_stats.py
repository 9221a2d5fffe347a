"""The benchmark suite's statistics and result schema, and the wait before each timed call (settle)."""
import copy
import json
import random
import time

import pytest
import torch

from zenith.bench import schema, stats
from zenith.bench.cli import render_table
from zenith.bench.report import render_markdown


def noisy(center, n=40, spread=0.03, seed=1):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_quantiles_and_summary():
    xs = [5, 1, 4, 2, 3]
    assert stats.quantile(xs, 0) == 1 and stats.quantile(xs, 1) == 5 and stats.quantile(xs, 0.5) == 3
    assert stats.quantile([1, 2], 0.5) == 1.5
    s = stats.summary(xs)
    assert s["median"] == 3 and s["n"] == 5 and s["p10"] == pytest.approx(1.4)
    with pytest.raises(ValueError):
        stats.quantile([], 0.5)


def test_paired_ratio_ci_brackets_truth_and_detects_difference():
    base = noisy(10.0, seed=1)
    faster = [b * 0.7 for b in base]  # exactly 0.7x in every pair
    r, lo, hi = stats.paired_ratio_ci(base, faster)
    assert r == pytest.approx(0.7) and lo == pytest.approx(0.7) and hi == pytest.approx(0.7)
    assert stats.verdict(r, lo, hi) == "faster"
    same = noisy(10.0, seed=2)
    r, lo, hi = stats.paired_ratio_ci(base, same)
    assert lo < 1.0 < hi
    assert stats.verdict(r, lo, hi) == "no difference"
    slower = noisy(13.0, seed=3)
    assert stats.verdict(*stats.paired_ratio_ci(base, slower)) == "slower"
    with pytest.raises(ValueError):
        stats.paired_ratio_ci([1.0], [1.0, 2.0])


def test_regression_check_on_synthetic_samples():
    base = noisy(10.0, seed=4)
    assert stats.is_regression(base, noisy(10.0, seed=5), 0.05)[0] is False  # noise only
    assert stats.is_regression(base, noisy(10.3, seed=6), 0.05)[0] is False  # 3% slower: under threshold
    assert stats.is_regression(base, noisy(12.0, seed=7), 0.05)[0] is True  # 20% slower
    assert stats.is_regression(base, noisy(8.0, seed=8), 0.05)[0] is False  # faster
    # a large but noisy slowdown with few samples is not called significant
    wild = [10.0, 30.0, 9.0, 31.0]
    assert stats.is_regression([10.0, 11.0, 9.5, 10.5], wild, 0.05)[0] is False


def valid_doc():
    ok = {"status": "ok", "samples_s": [0.010, 0.011, 0.012], "latency": stats.summary([0.010, 0.011, 0.012]),
          "cold_start_s": 1.0, "agreement": {"max_abs_err": 1e-6, "max_rel_err": 1e-7, "cosine": 1.0},
          "ratio_vs_eager": {"median": 1.0, "ci_lo": 0.9, "ci_hi": 1.1, "verdict": "no difference"}}
    return {"schema": schema.SCHEMA, "created": "2026-11-22T00:00:00+00:00",
            "machine": {"cpu": "x", "cores": 2, "threads": 2, "torch": "2.14.1", "zenith": "0.1.0",
                        "zenith_commit": "abc", "simd": ["avx2"]},
            "config": {"command": "zenith bench bert-base"},
            "workloads": [{"name": "bert-base", "params": {"seq": 128},
                           "results": {"eager": ok, "zenith": copy.deepcopy(ok),
                                       "onnxruntime": {"status": "skipped", "reason": "not installed"}}}]}


def test_schema_accepts_valid_and_names_problems():
    doc = valid_doc()
    assert schema.validate(json.loads(json.dumps(doc))) is not None
    bad = valid_doc()
    bad["schema"] = "zenith-bench/0"
    with pytest.raises(schema.SchemaError, match="schema"):
        schema.validate(bad)
    bad = valid_doc()
    del bad["machine"]["cpu"]
    with pytest.raises(schema.SchemaError, match="machine: missing 'cpu'"):
        schema.validate(bad)
    bad = valid_doc()
    bad["workloads"][0]["results"]["zenith"]["samples_s"] = [0.01, -1]
    with pytest.raises(schema.SchemaError, match="positive"):
        schema.validate(bad)
    bad = valid_doc()
    del bad["workloads"][0]["results"]["onnxruntime"]["reason"]
    with pytest.raises(schema.SchemaError, match="reason"):
        schema.validate(bad)
    bad = valid_doc()
    bad["workloads"][0]["results"]["eager"]["status"] = "great"
    with pytest.raises(schema.SchemaError, match="status"):
        schema.validate(bad)


def test_table_and_markdown_show_agreement_and_skips():
    doc = valid_doc()
    table = render_table(doc)
    assert "onnxruntime" in table and "skipped: not installed" in table and "cosine" in table
    md = render_markdown(doc)
    assert "| zenith |" in md and "no difference" in md and "max_rel_err" in md and "skipped" in md


def test_compare_exit_code(tmp_path):
    from zenith.bench.cli import main

    base = valid_doc()
    base["workloads"][0]["results"]["zenith"]["samples_s"] = noisy(0.010, seed=9)
    new = copy.deepcopy(base)
    new["workloads"][0]["results"]["zenith"]["samples_s"] = noisy(0.013, seed=10)
    (tmp_path / "a.json").write_text(json.dumps(base))
    (tmp_path / "b.json").write_text(json.dumps(new))
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--threshold", "5%"]) == 1


def test_paired_rounds_follow_round_orders_and_time_every_call():
    from zenith.bench.stats import paired_rounds, round_orders

    calls = []
    fns = {k: (lambda k=k: lambda x: calls.append((k, x)))() for k in "abc"}
    times = paired_rounds(fns, 4, 7)
    assert [k for k, _ in calls] == [k for order in round_orders("abc", 4) for k in order]
    assert all(x == 7 for _, x in calls)
    assert set(times) == set("abc") and all(len(v) == 4 and min(v) >= 0 for v in times.values())


@pytest.mark.parametrize("n", range(1, 8))
def test_round_orders_balance_first_place_and_predecessors(n):
    """Over a whole design (n rows, 2n for n odd) every name runs first equally often and
    directly after every other name equally often; rotation fails this for n > 2."""
    from collections import Counter

    from zenith.bench.stats import round_orders

    names = [f"c{i}" for i in range(n)]
    rows = n if n % 2 == 0 else 2 * n
    orders = round_orders(names, 3 * rows)
    assert orders[:rows] == orders[rows:2 * rows]
    orders = orders[:rows]
    assert all(sorted(o) == sorted(names) for o in orders)
    assert set(Counter(o[0] for o in orders).values()) == {rows // n}
    pairs = Counter((a, b) for o in orders for a, b in zip(o, o[1:]))
    if n > 1:
        assert len(pairs) == n * (n - 1) and set(pairs.values()) == {rows // n}
    assert round_orders([], 2) == [[], []]
    calls = [k for o in round_orders(names, 3 * rows) for k in o]
    if n > 2:  # across rounds too: a name never runs right after itself
        assert all(a != b for a, b in zip(calls, calls[1:]))


def test_run_interleaved_times_in_round_orders():
    from zenith.bench import runner
    from zenith.bench.runner import Config

    calls = []
    fns = {k: (lambda k=k: lambda: calls.append(k) or torch.ones(2))() for k in ("eager", "a", "b", "c")}
    res = runner.run_interleaved(Config(iterations=6, warmup=0), fns, lambda fw, out: {})
    assert calls[4:] == [k for o in stats.round_orders(list(fns), 6) for k in o]
    assert all(len(res[k]["samples_s"]) == 6 for k in fns)


def test_run_interleaved_compiles_every_instance_of_one_model_class():
    # Ten compiled models sharing one forward's code (nn.Sequential of 1..10 layers: a
    # cache entry each): Dynamo's default recompile_limit (8 per code object) would run the
    # last two eagerly, silently; the runner raises the limit with the contestants.
    from torch._dynamo.utils import counters

    from zenith.bench import runner
    from zenith.bench.runner import Config

    torch._dynamo.reset()
    x = torch.randn(2, 4)
    fns = {}
    for k in range(1, 11):
        m = torch.compile(torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(k)]), backend="eager")
        fns[f"m{k}"] = lambda m=m: m(x)
    before = counters["frames"]["ok"]
    try:
        res = runner.run_interleaved(Config(iterations=2, warmup=0, settle=False), fns, lambda fw, out: {})
        assert all(r["status"] == "ok" for r in res.values())
        assert counters["frames"]["ok"] - before == 10
    finally:
        torch._dynamo.reset()


def test_run_interleaved_fails_a_contestant_past_the_recompile_limit():
    # One contestant recompiling past the runner's limit (8 a contestant): it fails, it is
    # not timed running eager PyTorch
    from zenith.bench import runner
    from zenith.bench.runner import Config

    torch._dynamo.reset()
    f = torch.compile(lambda t: t * 2, backend="eager", dynamic=False)

    def many():  # 12 static shapes, an entry each
        return [f(torch.ones(n)) for n in range(1, 13)]
    try:
        res = runner.run_interleaved(Config(iterations=1, warmup=0, settle=False), {"many": many},
                                     lambda fw, out: {})
        assert res["many"]["status"] == "failed" and "recompile" in res["many"]["reason"].lower()
        # past the limit in a later call (the warm-up's or a round's): that contestant
        # fails and leaves the rounds; the other is timed in every round
        torch._dynamo.reset()
        g = torch.compile(lambda t: t + 1, backend="eager", dynamic=False)
        sizes = iter(range(1, 100))

        def late():  # 6 new static shapes a call: the third call passes 8 x 2 entries
            return [g(torch.ones(next(sizes))) for _ in range(6)]
        res = runner.run_interleaved(Config(iterations=3, warmup=1, settle=False),
                                     {"late": late, "fine": lambda: torch.ones(2)}, lambda fw, out: {})
        assert res["late"]["status"] == "failed" and "recompile" in res["late"]["reason"].lower()
        assert res["fine"]["status"] == "ok" and len(res["fine"]["samples_s"]) == 3
    finally:
        torch._dynamo.reset()


def test_settle_waits_for_quiet_polls_in_a_row_and_reports_when_the_quiet_began(monkeypatch):
    polls = iter([2, 1, 0, 1, 0, 0, 0, 5])  # running threads at each poll
    seen, clock = [], [0.0]
    real = time.perf_counter
    time_at = []

    def sleep(s):  # a fake clock: each poll 1 ms apart
        clock[0] += 0.001

    def running():
        seen.append(1)
        time_at.append(clock[0])
        return next(polls)

    with monkeypatch.context() as mp:
        mp.setattr(stats.time, "perf_counter", lambda: clock[0])
        busy = stats.settle(quiet_polls=3, running=running, sleep=sleep)
    assert len(seen) == 7  # quiet only from the 5th poll on: 0, 0, 0 ends it
    assert busy == pytest.approx(time_at[4])  # the threads ran until the 5th poll (4 ms), not until the 7th
    assert real is time.perf_counter
    # a pool that never goes quiet: settle gives up at its limit, and says so by a value >= limit
    assert 0.01 <= stats.settle(limit=0.01, running=lambda: 1, sleep=time.sleep) < 0.5
    # no /proc: a fixed wait, longer than any pool measured
    slept = []
    assert stats.settle(running=lambda: None, sleep=slept.append) == stats.NO_PROC_WAIT == slept[0]


def test_running_threads_reads_names_that_are_not_utf8():
    import ctypes
    import threading

    if stats.running_threads() is None:
        pytest.skip("no /proc")
    named, done = threading.Event(), threading.Event()

    def worker():  # a 15-byte name that cuts a UTF-8 character in two (prctl PR_SET_NAME)
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p("ab)c d(€€€€€".encode()[:15]), 0, 0, 0)
        named.set()
        done.wait()

    th = threading.Thread(target=worker)
    th.start()
    named.wait()
    try:
        # The worker may still be runnable between set() and sleeping in wait() (on a loaded
        # host, for a while): its state reads R until then, S after. A name misparsed would
        # keep the count wrong (or raise), so it must reach 0 within the deadline.
        deadline = time.monotonic() + 5.0
        while stats.running_threads() != 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stats.running_threads() == 0
    finally:
        done.set()
        th.join()


def test_settle_sees_a_real_thread_spinning_outside_the_gil():
    import hashlib
    import threading

    if stats.running_threads() is None:
        pytest.skip("no /proc")
    stop = threading.Event()
    data = b"x" * (8 << 20)

    def spin():  # hashing 8 MiB releases the GIL: this thread runs in C, as a runtime's pool does
        while not stop.is_set():
            hashlib.sha256(data).digest()

    th = threading.Thread(target=spin)
    th.start()
    threading.Timer(0.05, stop.set).start()
    stats.settle()
    assert stop.is_set()  # settle returned only once the spinning thread had been told to stop
    th.join()
    assert stats.settle() < 0.1  # and once it stopped, no wait beyond the quiet polls


def test_every_timed_call_starts_after_settle_outside_its_time(monkeypatch):
    from zenith.bench import runner
    from zenith.bench.runner import Config

    events = []
    base = {"eager": 0.001, "a": 0.01, "b": 0.1}

    def fake_settle():  # takes 20 ms; returns a wait naming the contestant that ran last and its call count
        time.sleep(0.02)
        called = [e for e in events if e != "settle"]
        events.append("settle")
        if not called:
            return 0.0
        n = called.count(called[-1])  # 1 after its cold call, 2-5 after its timed ones
        return 0.6 if (called[-1], n) == ("eager", 5) else base[called[-1]] * n

    monkeypatch.setattr(stats, "settle", fake_settle)
    fns = {k: (lambda k=k: lambda: events.append(k) or torch.ones(2))() for k in ("eager", "a", "b")}
    res = runner.run_interleaved(Config(iterations=4, warmup=0), fns, lambda fw, out: {})
    calls = [e for e in events if e != "settle"]
    assert all(events[events.index(k) - 1] == "settle" for k in fns)  # the cold calls too
    timed = events[events.index("settle", 6):]  # the timed rounds: settle, call, settle, call, ..., settle
    assert timed[-1] == "settle" and all(timed[i] == "settle" and timed[i + 1] in fns
                                         for i in range(0, len(timed) - 1, 2))
    assert len(calls) == 3 + 4 * 3
    assert all(max(res[k]["samples_s"]) < 0.02 for k in fns)  # the wait is not in the time
    # each wait is charged to the contestant that ran before it, and the median is reported
    assert res["a"]["busy_after_s"] == pytest.approx(0.035) and res["b"]["busy_after_s"] == pytest.approx(0.35)
    assert res["eager"]["never_quiet"] == 1 and res["a"]["never_quiet"] == 0


def test_paired_rounds_settle_before_every_call(monkeypatch):
    events = []
    monkeypatch.setattr(stats, "settle", lambda: events.append("settle") or 0.0)
    fns = {k: (lambda k=k: lambda: events.append(k))() for k in "ab"}
    stats.paired_rounds(fns, 3)
    assert events == [x for k in [k for o in stats.round_orders("ab", 3) for k in o] for x in ("settle", k)]
