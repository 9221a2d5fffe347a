# Paired per-iteration ratios from a `zenith bench ... --json` file (the runner interleaves contestants, so
# iteration i of each is a pair): int8 / fp32 and Zenith int8 / ONNX Runtime int8 per workload.
# python paired_from_json.py FILE.json
import json, sys
from zenith.bench.stats import paired_ratio_ci
for w in json.load(open(sys.argv[1]))["workloads"]:
    r = w["results"]
    q = next((k for k in r if k.startswith("zenith:int8")), None)
    if not q or r.get("zenith", {}).get("status") != "ok":
        continue
    fmt = lambda t: f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"
    line = f"{w['name']} {json.dumps(w['params'].get('batch', ''))}: {q} / zenith {fmt(paired_ratio_ci(r['zenith']['samples_s'], r[q]['samples_s']))}"
    peer = "onnxruntime:" + q.split(":")[1]
    if r.get(peer, {}).get("status") == "ok":
        line += f"; {q} / {peer} {fmt(paired_ratio_ci(r[peer]['samples_s'], r[q]['samples_s']))}"
    print(line)
