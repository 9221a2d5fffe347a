# The in-process A/B the scripts here share: one compiled module, rounds interleaved, the
# switch's env var (ab_switches.diff, read per call) unset (new) then set (old) in each.
import os
import statistics as st
import time

import torch


def interleave(f, x, ref, var, rounds, skip=2):
    """Median ms new / old, the median per-round new/old ratio (with p25, p75), and each
    variant's max error against ref relative to max |ref|."""
    times, errs = ([], []), [0.0, 0.0]
    with torch.no_grad():
        for _ in range(rounds):
            for i in (0, 1):
                if i:
                    os.environ[var] = "1"
                else:
                    os.environ.pop(var, None)
                t = time.perf_counter()
                y = f(x)
                times[i].append(time.perf_counter() - t)
                errs[i] = ((y - ref).abs().max() / ref.abs().max()).item()
    os.environ.pop(var, None)
    new, old = times[0][skip:], times[1][skip:]
    rat = sorted(a / b for a, b in zip(new, old))
    return dict(new_ms=st.median(new) * 1e3, old_ms=st.median(old) * 1e3, ratio=st.median(rat),
                p25=rat[len(rat) // 4], p75=rat[3 * len(rat) // 4], err_new=errs[0], err_old=errs[1])


def line(label, r, new="new", old="old"):
    return (f"{label}: {new} {r['new_ms']:.3f} ms, {old} {r['old_ms']:.3f} ms; {new}/{old} per round "
            f"{r['ratio']:.3f} (p25 {r['p25']:.3f}, p75 {r['p75']:.3f}); max err / max |eager| "
            f"{r['err_new']:.1e} / {r['err_old']:.1e}")
