# all-MiniLM-L6-v2 seq 32: the kernel profile of torch.compile(backend="zenith") and of zenith.freeze, 50 calls each:
# events and op time a call. python minilm_nodes_compiled_frozen.py
import os, time, torch, zenith, copy, collections
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
m = load_minilm()[1]
ids = torch.randint(1000, 20000, (1, 32)); am = torch.ones_like(ids)
a = torch.compile(copy.deepcopy(m), backend="zenith")
f = zenith.freeze(copy.deepcopy(m))
with torch.no_grad():
    for g in (a, f):
        for _ in range(10): g(ids, am)
    for name, g in (("compiled", a), ("frozen", f)):
        with zenith.profile(trace=os.devnull) as p:
            for _ in range(50): g(ids, am)
        by = collections.defaultdict(lambda: [0, 0.0])
        for e in p.events:
            by[e[0]][0] += 1; by[e[0]][1] += e[5] / 1e3
        ev = sorted(p.events, key=lambda e: e[4])
        print(name, "events/call", len(p.events) // 50, "op ms/call", round(sum(v[1] for v in by.values()) / 50, 3),
              {k: (c // 50, round(t / 50, 3)) for k, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:8]})
