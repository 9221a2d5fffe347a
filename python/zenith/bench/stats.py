"""Statistics for benchmark results: order statistics, the order of interleaved rounds
(round_orders), the quiet each timed call starts in (settle), paired rounds (every
variant once a round) and a paired bootstrap CI for the ratio of two contestants, and
the noise-aware regression check."""
from __future__ import annotations

import math
import os
import random
import statistics
import threading
import time


def quantile(xs, q):
    """Linear-interpolated quantile, q in [0, 1]."""
    s = sorted(xs)
    if not s:
        raise ValueError("quantile of no samples")
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(xs):
    return {"median": statistics.median(xs), "p10": quantile(xs, 0.10), "p90": quantile(xs, 0.90),
            "min": min(xs), "max": max(xs), "n": len(xs)}


def round_orders(names, rounds):
    """The order of each of `rounds` interleaved rounds over `names`: the rows of a
    Williams design in turn, so within a round each name runs first, and directly
    after each other name, equally often over a whole design (n rows for n even, 2n for
    n odd), and no name runs twice in a row across rounds (n > 2). Rotating one order
    would keep each name's predecessor fixed for n > 2, and a predecessor matters: a
    runtime whose threads still spin or wake slows the next call (MobileNet V2 batch 1
    on Zen 5: zenith.freeze 2.20 ms after Zenith, 2.52 after OpenVINO, 2026-12-04)."""
    names = list(names)
    n = len(names)
    if n == 0:
        return [[] for _ in range(rounds)]
    # 0, 1, n-1, 2, n-2, ...: the steps between neighbours are all different mod n
    base = [(j + 1) // 2 if j % 2 else -(j // 2) % n for j in range(n)]
    rows = [[(b + r) % n for b in base] for r in range(n)]
    if n % 2:  # the reversed rows, in an order that never puts a name after itself across rounds
        rows += [rows[r][::-1] for r in [0, *range(n - 1, 0, -1)]]
    return [[names[i] for i in rows[r % len(rows)]] for r in range(rounds)]


def running_threads():
    """How many of this process's threads other than the calling one are running or
    runnable now (state R in /proc/self/task/*/stat); None where there is no /proc."""
    me = threading.get_native_id()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    n = 0
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:  # bytes: a thread's name need not be UTF-8
                st = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        at = st.rindex(b")") + 2  # the state follows the name, which may hold spaces and parentheses
        n += st[at:at + 1] == b"R"
    return n


# Without /proc, a fixed wait: longer than any pool measured spinning after its call
# (ONNX Runtime's default 35-45 ms, libgomp's ~9 ms, OpenVINO's ~2 ms; Zen 5, 2026-12-04).
NO_PROC_WAIT = 0.06
SETTLE_LIMIT = 0.5


def settle(step=0.0002, quiet_polls=3, limit=SETTLE_LIMIT, running=running_threads, sleep=time.sleep):
    """Waits until no other thread of this process runs: `quiet_polls` polls in a row,
    `step` apart, find none in state R. Returns the seconds from the call to the first
    of those quiet polls (how long the threads kept running), or the seconds waited when
    `limit` passed first (a value >= limit: the threads never went quiet).
    A runtime's pool keeps spinning after its call returns (Zenith's libgomp workers
    about 9 ms on Zen 5, ONNX Runtime's 35 ms at its default), taking the cores from
    whatever runs next: ONNX Runtime and OpenVINO ran ResNet-50 batch 1 22-28% slower
    right after Zenith than after themselves (2026-12-04), so every timed call waits for
    the quiet first. Thread states, not CPU time: the kernel adds a thread running on
    another core to the process's CPU time only at that core's next tick (4 ms at HZ
    250), so a spinning pool could look idle over a short wait."""
    start = time.perf_counter()
    quiet, quiet_since = 0, start
    while True:
        now = time.perf_counter()
        if now - start >= limit:
            return now - start
        n = running()
        if n is None:
            sleep(NO_PROC_WAIT)
            return NO_PROC_WAIT
        if n:
            quiet = 0
        else:
            if quiet == 0:
                quiet_since = now
            quiet += 1
            if quiet >= quiet_polls:
                return quiet_since - start
        sleep(step)


def paired_rounds(fns, rounds, *args, **kwargs):
    """Calls every fn of `fns` (name -> callable) once a round on args, in the orders of
    round_orders, each call after settle(); returns name -> seconds per round, for
    paired_ratio_ci."""
    times = {k: [] for k in fns}
    for order in round_orders(fns, rounds):
        for k in order:
            settle()
            t = time.perf_counter()
            fns[k](*args, **kwargs)
            times[k].append(time.perf_counter() - t)
    return times


def paired_ratio_ci(base, other, n_boot=2000, alpha=0.05, seed=0):
    """Median of the per-pair ratios other[i] / base[i] with a percentile bootstrap CI.
    Pairs come from interleaved runs, so drift hits both members of a pair alike."""
    if len(base) != len(other) or not base:
        raise ValueError("paired samples must have the same, non-zero length")
    ratios = [o / b for b, o in zip(base, other)]
    rng = random.Random(seed)
    n = len(ratios)
    boots = sorted(statistics.median(rng.choices(ratios, k=n)) for _ in range(n_boot))
    return statistics.median(ratios), quantile(boots, alpha / 2), quantile(boots, 1 - alpha / 2)


def unpaired_ratio_ci(base, other, n_boot=2000, alpha=0.05, seed=0):
    """Ratio of medians median(other) / median(base) with a bootstrap CI resampling
    each side independently (for runs taken at different times)."""
    if not base or not other:
        raise ValueError("need samples on both sides")
    rng = random.Random(seed)
    boots = sorted(statistics.median(rng.choices(other, k=len(other))) /
                   statistics.median(rng.choices(base, k=len(base))) for _ in range(n_boot))
    return (statistics.median(other) / statistics.median(base), quantile(boots, alpha / 2),
            quantile(boots, 1 - alpha / 2))


def verdict(ratio, lo, hi):
    """For a time ratio (other / base): lower is faster. Inside the noise: no difference."""
    if lo <= 1.0 <= hi:
        return "no difference"
    return "faster" if hi < 1.0 else "slower"


def is_regression(base, new, threshold=0.05, n_boot=2000, seed=0):
    """True when `new` timings are slower than `base` beyond `threshold` with 95%
    confidence: the lower end of the bootstrap CI of median(new)/median(base) exceeds
    1 + threshold. Returns (regressed, (ratio, lo, hi))."""
    r = unpaired_ratio_ci(base, new, n_boot=n_boot, seed=seed)
    return r[1] > 1.0 + threshold, r


def ratio_text(r, suffix=""):
    """'0.85x [0.80, 0.90]' for a {'median', 'ci_lo', 'ci_hi'} dict, '-' for None."""
    if not r:
        return "-"
    return f"{r['median']:.2f}{suffix} [{r['ci_lo']:.2f}, {r['ci_hi']:.2f}]"
