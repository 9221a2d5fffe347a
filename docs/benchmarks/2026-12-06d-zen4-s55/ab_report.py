# The report env_ab.py and plan_ab.py print: the baseline's median, then each other value's median and its time
# over the baseline's per round (median [p10, p90]).
import os, statistics


def report(label, var, values, res):
    isa = "AVX2" if os.environ.get("ZENITH_NO_AVX512") else "default"
    base = res[values[0]]
    print(f"{label} {isa}: {var}={values[0]} {statistics.median(base)*1e3:.2f} ms")
    for v in values[1:]:
        r = sorted(n / o for n, o in zip(res[v], base))
        print(f"  {var}={v} {statistics.median(res[v])*1e3:.2f} ms, per round {statistics.median(r):.3f} "
              f"[{r[len(r)//10]:.3f}, {r[-len(r)//10-1]:.3f}]")
