# Paired per-iteration ratios from a `zenith bench ... --json` file (the runner interleaves contestants, so
# iteration i of each is a pair): each Zenith int8 contestant against Zenith fp32 and against ONNX Runtime's
# int8 of the same kind (zenith:int8-dynamic-w7 against onnxruntime:int8-dynamic). python paired_from_json.py FILE.json
import json, sys
from zenith.bench.stats import paired_ratio_ci
fmt = lambda t: f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"
for w in json.load(open(sys.argv[1]))["workloads"]:
    r = w["results"]
    if r.get("zenith", {}).get("status") != "ok":
        continue
    for q in (k for k in r if k.startswith("zenith:int8") and r[k].get("status") == "ok"):
        line = f"{w['name']} {json.dumps(w['params'].get('batch', ''))}: {q} / zenith {fmt(paired_ratio_ci(r['zenith']['samples_s'], r[q]['samples_s']))}"
        peer = "onnxruntime:" + q.split(":")[1].removesuffix("-w7")
        if r.get(peer, {}).get("status") == "ok":
            line += f"; {q} / {peer} {fmt(paired_ratio_ci(r[peer]['samples_s'], r[q]['samples_s']))}"
        print(line)
