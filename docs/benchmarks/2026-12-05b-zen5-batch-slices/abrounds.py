# The interleaved rounds the A/B scripts of this directory share (prep_ab.py, switch_ab.py,
# chain_ab.py): per round every value once, in shuffled order, each a median of 3 calls;
# ratios per round against the first value, median and quartiles.
import os, random, statistics, time


def rounds(vals, n, call, per=1.0):
    """{value: [seconds / per, one a round]}; call(value) runs one call with that value."""
    res = {v: [] for v in vals}
    for _ in range(n):
        for v in random.sample(vals, len(vals)):
            ts = []
            for _ in range(3):
                t = time.perf_counter(); call(v); ts.append(time.perf_counter() - t)
            res[v].append(statistics.median(ts) / per)
    return res


def report(head, env, vals, res, scale=1e3, unit="ms"):
    base = res[vals[0]]
    print(f"{head} {env}={vals[0]}: {statistics.median(base) * scale:.2f} {unit}")
    for v in vals[1:]:
        rat = sorted(a / c for a, c in zip(res[v], base)); k = len(rat)
        print(f"  {env}={v}: {statistics.median(res[v]) * scale:.2f} {unit}, ratio {rat[k // 2]:.3f} "
              f"[{rat[k // 4]:.3f}, {rat[3 * k // 4]:.3f}]")


def switched(env, fn):
    """call(value): sets the environment variable env (read by the C++ per call), runs fn()."""
    def call(v):
        os.environ[env] = v
        return fn()
    return call
