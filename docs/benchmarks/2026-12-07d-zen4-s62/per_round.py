"""Zenith (and frozen) / the faster of ONNX Runtime and OpenVINO per round, and / Inductor,
from a `zenith bench --json` file: median [min, max] of the per-round ratios (samples_s
are in round order). Usage: per_round.py RESULTS.json."""
import json
import statistics as st
import sys


def main():
    d = json.load(open(sys.argv[1]))
    for w in d["workloads"]:
        r = w["results"]
        p = w["params"]
        tag = f"{w['name']} " + ", ".join(f"{k} {v}" for k, v in p.items() if k in ("batch", "seq"))
        peers = [r[k]["samples_s"] for k in ("onnxruntime", "openvino") if k in r and r[k]["status"] == "ok"]
        best = [min(v) for v in zip(*peers)]
        out = []
        for z in ("zenith", "zenith-frozen"):
            if z not in r or r[z]["status"] != "ok":
                continue
            rp = sorted(a / b for a, b in zip(r[z]["samples_s"], best))
            ri = sorted(a / b for a, b in zip(r[z]["samples_s"], r["inductor"]["samples_s"]))
            out.append(f"{z} / faster peer {st.median(rp):.3f} [{rp[0]:.3f}, {rp[-1]:.3f}], / inductor {st.median(ri):.3f}")
        print(f"{tag}: " + "; ".join(out))


if __name__ == "__main__":
    main()
