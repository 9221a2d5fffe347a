# Issue 17's ratios from a `zenith bench ... --json` file: per workload, Zenith's (and Zenith frozen's) per-round time
# over ONNX Runtime's, OpenVINO's and Inductor's (paired_ratio_ci: median per-round ratio, 95% bootstrap interval).
# python peer_ratios.py FILE.json
import json, sys
from zenith.bench.stats import paired_ratio_ci
for w in json.load(open(sys.argv[1]))["workloads"]:
    r = w["results"]
    p = w["params"]
    tag = f"{w['name']} b{p.get('batch', '')}" + (f" s{p['seq']}" if "seq" in p else "")
    for z in ("zenith", "zenith-frozen"):
        if r.get(z, {}).get("status") != "ok":
            continue
        parts = []
        for peer in ("onnxruntime", "openvino", "inductor"):
            if r.get(peer, {}).get("status") == "ok":
                t = paired_ratio_ci(r[peer]["samples_s"], r[z]["samples_s"])
                parts.append(f"/ {peer} {t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]")
        print(f"{tag} {z}: " + "; ".join(parts))
