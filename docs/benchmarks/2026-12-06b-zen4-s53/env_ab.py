# The paired A/B both scripts of this directory run (onepass_ab.py, direct_ab.py): "old" sets an environment
# variable the C++ reads per call to "0", "new" clears it; 3 warm-up pairs, then per round one call of each in
# random order; the per-round ratio new / old, median and p10 / p90.
import os, random, statistics, time


def switched(env, fn):
    """call(k) -> (output, seconds): fn() with env = "0" for k == "old", unset for "new"."""
    def call(k):
        if k == "old": os.environ[env] = "0"
        else: os.environ.pop(env, None)
        t = time.perf_counter(); out = fn(); dt = time.perf_counter() - t
        return out, dt
    return call


def alternate(call, rounds):
    res = {"new": [], "old": []}
    for _ in range(3):
        call("new"); call("old")
    for _ in range(rounds):
        for k in random.sample(list(res), 2):
            res[k].append(call(k)[1])
    return res


def summary(res):
    ratios = sorted(n / o for n, o in zip(res["new"], res["old"]))
    return (f"new {statistics.median(res['new'])*1e3:.2f} ms, old {statistics.median(res['old'])*1e3:.2f} ms, "
            f"new/old per round median {statistics.median(ratios):.3f} [{ratios[len(ratios)//10]:.3f}, "
            f"{ratios[-len(ratios)//10-1]:.3f}] (p10, p90)")
