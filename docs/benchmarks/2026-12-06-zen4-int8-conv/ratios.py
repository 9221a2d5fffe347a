# Per-round ratios between two contestants of a bench JSON: median and range over rounds.
# python ratios.py FILE.json A B [A B ...]
import json, statistics, sys
d = json.load(open(sys.argv[1]))
pairs = list(zip(sys.argv[2::2], sys.argv[3::2]))
for w in d["workloads"]:
    r = w.get("results", {})
    for a, b in pairs:
        if r.get(a, {}).get("status") != "ok" or r.get(b, {}).get("status") != "ok":
            continue
        q = sorted(x / y for x, y in zip(r[a]["samples_s"], r[b]["samples_s"]))
        print(f"{w['name']:10} {w['params'].get('seq', w['params'].get('batch'))!s:>4} {a} / {b}: median "
              f"{statistics.median(q):.3f} [{q[0]:.3f}, {q[-1]:.3f}] over {len(q)} rounds")
