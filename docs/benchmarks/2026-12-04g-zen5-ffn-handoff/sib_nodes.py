# Per-node kernel time of the FFN addmms, hand-off off / on, alternating profiled rounds.
import os, random, statistics, sys, torch, zenith, transformers
torch.manual_seed(0); torch.set_num_threads(2)
name, seq = sys.argv[1], int(sys.argv[2])
cfg = transformers.BertConfig() if name == "bert" else transformers.BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = transformers.BertModel(cfg).eval(); ids = torch.randint(0, 1000, (1, seq))
fs = {}
with torch.no_grad():
    for k in ("0", "1"):
        os.environ["ZENITH_ADDMM_SIBLINGS"] = k; fs[k] = zenith.freeze(m); fs[k](ids)
    res = {}
    for r in range(int(sys.argv[3]) if len(sys.argv) > 3 else 10):
        for k in random.sample(list(fs), 2):
            with zenith.profile(trace="/dev/null") as p:
                for _ in range(3): fs[k](ids)
            per = {}
            for (op, node, graph, tid, ts, dur, shape), g in zip(p.events, p.gemm):
                if op in ("addmm", "addmm_parts") and g: per.setdefault(g, []).append(dur)
            for g, d in per.items(): res.setdefault((k, g), []).append(sum(d) / len(d))
for (k, g), v in sorted(res.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(k, g, f"{statistics.median(v):.1f} us")
