# all-MiniLM-L6-v2 (real weights) at seq 128: per-op-kind totals and the largest nodes of fp32 and int8-dynamic
# side by side (zenith.freeze, one process, the two profiled in alternating rounds, median per node).
# python minilm_pernode.py [rounds] [seq]
import os, sys, copy, collections, torch, zenith
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
seq = int(sys.argv[2]) if len(sys.argv) > 2 else 128
m = load_minilm()[1]
ids = torch.randint(1000, 20000, (1, seq)); am = torch.ones_like(ids)
q = zenith.quantize(copy.deepcopy(m), "int8-dynamic")
fs = {"fp32": zenith.freeze(m), "int8": zenith.freeze(q)}
times = {k: collections.defaultdict(list) for k in fs}; info = {k: {} for k in fs}
with torch.no_grad():
    for f in fs.values():
        for _ in range(3): f(ids, am)
    for r in range(rounds):
        for k, f in fs.items():
            with zenith.profile(trace=os.devnull) as p:
                f(ids, am)
            for op, node, graph, tid, ts, dur, shape in p.events:
                times[k][node].append(dur); info[k][node] = (op, tuple(shape))
for k in fs:
    med = [(info[k][n], sorted(d)[len(d) // 2] / 1e3) for n, d in times[k].items()]
    by = collections.defaultdict(lambda: [0, 0.0])
    for (op, _), t in med:
        by[op][0] += 1; by[op][1] += t
    print(f"== {k}: {len(med)} nodes, {sum(t for _, t in med):.3f} ms")
    for op, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        if t > 0.01: print(f"  {op:<22} x{n:<3} {t:7.3f} ms")
    shapes = collections.defaultdict(list)
    for (op, shape), t in med:
        shapes[(op, shape)].append(t)
    for (op, shape), ts in sorted(shapes.items(), key=lambda kv: -sum(kv[1]))[:8]:
        print(f"    {op:<14} {str(shape):<22} x{len(ts):<3} median {sorted(ts)[len(ts) // 2]:.3f} ms, total {sum(ts):.3f}")
    if k == "int8":
        for n, d in sorted(times[k].items())[:24]:
            print(f"    node {n:<4} {info[k][n][0]:<12} {str(info[k][n][1]):<20} {sorted(d)[len(d) // 2] / 1e3:.3f} ms")
