"""Alternates worker processes of two builds (old: PYTHONPATH=OLD; new: the venv's),
ROUNDS each, A B B A order; per-workload medians and the median of per-round ratios."""
import json, os, subprocess, sys, statistics as st
old, rounds = sys.argv[1], int(sys.argv[2])
py = "/work/main/.venv/bin/python"
res = {"old": [], "new": []}
for r in range(rounds):
    for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
        env = dict(os.environ)
        if which == "old": env["PYTHONPATH"] = old
        line = subprocess.run([py, os.path.join(os.path.dirname(__file__), "worker.py")], env=env,
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        d = json.loads(line); res[which].append(d); print(which, d, flush=True)
for k in res["new"][0]:
    if k == "zenith": continue
    o = [d[k] for d in res["old"]]; n = [d[k] for d in res["new"]]
    ratios = sorted(b / a for a, b in zip(o, n))
    print(f"{k}: old {st.median(o):.1f} ms, new {st.median(n):.1f} ms, new/old per round median {st.median(ratios):.3f} "
          f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f})")
