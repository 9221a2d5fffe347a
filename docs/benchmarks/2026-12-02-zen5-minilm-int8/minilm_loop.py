# all-MiniLM-L6-v2 int8-dynamic (or fp32) at seq 128 in a loop of zenith.freeze calls, for perf / py-spy:
# python minilm_loop.py int8|fp32 seconds [compile]  (compile: torch.compile(backend="zenith") as the bench runs it)
import sys, time, copy, torch, zenith
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
m = load_minilm()[1]
ids = torch.randint(1000, 20000, (1, 128)); am = torch.ones_like(ids)
if sys.argv[1] == "int8": m = zenith.quantize(copy.deepcopy(m), "int8-dynamic")
f = torch.compile(m, backend="zenith") if sys.argv[3:] == ["compile"] else zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(ids, am)
    t0 = time.time(); n = 0
    while time.time() - t0 < float(sys.argv[2]): f(ids, am); n += 1
print(f"{n} calls, {(time.time() - t0) / n * 1e3:.3f} ms each")
