import json, sys
from zenith.bench import stats
doc = json.load(open(sys.argv[1]))
for w in doc["workloads"]:
    r = w["results"]; p = w.get("params", {})
    ok = {k: v["samples_s"] for k, v in r.items() if v.get("status") == "ok"}
    peers = [k for k in ok if k.split(":")[0] in ("onnxruntime", "openvino")]
    for z in [k for k in ok if k.startswith("zenith")]:
        out = []
        for b in peers + [k for k in ok if k == "inductor"]:
            m, lo, hi = stats.paired_ratio_ci(ok[b], ok[z])
            out.append(f"/{b} {m:.3f} [{lo:.3f}, {hi:.3f}]")
        # against the faster peer per round
        if peers:
            fast = [min(ok[b][i] for b in peers) for i in range(len(ok[z]))]
            m, lo, hi = stats.paired_ratio_ci(fast, ok[z])
            out.append(f"/faster-peer-per-round {m:.3f} [{lo:.3f}, {hi:.3f}]")
        print(w["name"], json.dumps(p.get("batch", p.get("seq"))), z, "; ".join(out))
