# all-MiniLM-L6-v2 seq 32: torch.compile(backend="zenith") with and without Dynamo's guards on nn modules
# (guard_filter_fn=skip_guard_on_all_nn_modules_unsafe) against zenith.freeze, 30 interleaved rounds of 10 calls, median ms
# a call. python minilm_call_overhead.py
import time, torch, zenith, copy, statistics
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
m = load_minilm()[1]
ids = torch.randint(1000, 20000, (1, 32)); am = torch.ones_like(ids)
a = torch.compile(copy.deepcopy(m), backend="zenith")
b = torch.compile(copy.deepcopy(m), backend="zenith", options={"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})
f = zenith.freeze(copy.deepcopy(m))
ts = {"guards": [], "skip-nn": [], "frozen": []}
with torch.no_grad():
    for g in (a, b, f):
        for _ in range(10): g(ids, am)
    for r in range(30):
        for k, g in (("guards", a), ("skip-nn", b), ("frozen", f)):
            t = time.perf_counter()
            for _ in range(10): g(ids, am)
            ts[k].append((time.perf_counter() - t) / 10 * 1e3)
print({k: round(statistics.median(v), 3) for k, v in ts.items()})
