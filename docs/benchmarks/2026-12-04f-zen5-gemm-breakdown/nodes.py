import statistics, sys, torch, zenith, transformers
torch.manual_seed(0); torch.set_num_threads(2)
m = transformers.BertModel(transformers.BertConfig()).eval(); ids = torch.randint(0, 1000, (1, 128))
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): f(ids)
    with zenith.profile(trace="/dev/null") as p:
        for _ in range(10): f(ids)
per = {}
for (op, node, graph, tid, ts, dur, shape), g in zip(p.events, p.gemm):
    per.setdefault((op, node, g), []).append(dur)
rows = sorted(per.items(), key=lambda kv: kv[0][1])
for (op, node, g), d in rows[:40]:
    print(op, node, g, round(statistics.median(d), 1), (round(2*g[0]*g[1]*g[2]/statistics.median(d)/1e3) if g else ""))
print(str(p)[:3000])
