# Per-node kernel time of the GEMMs (addmm, addmm_parts), a pass off / on (pass_switch.two_copies), profiled rounds
# alternating. Usage: pass_nodes.py ZENITH_GEMM_HANDOFF|ZENITH_ADDMM_SIBLINGS bert|minilm SEQ [ROUNDS]
import random, statistics, sys, torch, zenith
from pass_switch import two_copies
env, name, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
m, ids, fs = two_copies(env, name, seq)
res = {}
with torch.no_grad():
    for r in range(int(sys.argv[4]) if len(sys.argv) > 4 else 10):
        for k in random.sample(list(fs), 2):
            with zenith.profile(trace="/dev/null") as p:
                for _ in range(3): fs[k](ids)
            per = {}
            for (op, node, graph, tid, ts, dur, shape), g in zip(p.events, p.gemm):
                if op in ("addmm", "addmm_parts") and g: per.setdefault(g, []).append(dur)
            for g, d in per.items(): res.setdefault((k, g), []).append(sum(d) / len(d))
for (k, g), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(k, g, f"{statistics.median(v):.1f} us")
