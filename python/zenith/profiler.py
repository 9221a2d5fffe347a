"""Per-kernel timing of the Zenith runtime.

    with zenith.profile() as p:
        model(x)
    print(p)            # table: op, calls, total ms, share

ZENITH_PROFILE=1 turns it on for the whole process and prints the table at exit.
"""
from __future__ import annotations

import atexit
import contextlib
import os

from zenith import _C


class Profile:
    def __init__(self):
        self.table = {}  # op -> (calls, seconds)

    def __str__(self):
        total = sum(s for _, s in self.table.values()) or 1e-12
        rows = sorted(self.table.items(), key=lambda kv: -kv[1][1])
        lines = [f"{'op':<22}{'calls':>8}{'total ms':>12}{'share':>8}"]
        for op, (calls, secs) in rows:
            lines.append(f"{op:<22}{calls:>8}{secs * 1e3:>12.2f}{100 * secs / total:>7.1f}%")
        lines.append(f"{'total':<22}{'':>8}{total * 1e3:>12.2f}")
        return "\n".join(lines)


@contextlib.contextmanager
def profile():
    p = Profile()
    _C.profile_reset()
    _C.profile_enable(True)
    try:
        yield p
    finally:
        _C.profile_enable(False)
        p.table = dict(_C.profile_snapshot())


def _enable_from_env():
    if os.environ.get("ZENITH_PROFILE", "") not in ("", "0"):
        _C.profile_reset()
        _C.profile_enable(True)

        def report():
            p = Profile()
            p.table = dict(_C.profile_snapshot())
            print("Zenith kernel profile (ZENITH_PROFILE=1)\n" + str(p))

        atexit.register(report)
