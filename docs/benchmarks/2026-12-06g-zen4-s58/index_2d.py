"""Zenith's index kernel on a 2-d gather against eager (run beside the model sweep)."""
import time, torch, zenith
torch.set_num_threads(2)
x = torch.randn(1, 21, 65, 65)
iy = torch.randint(0, 65, (520, 1)); ix = torch.randint(0, 65, (520,))
fs = {"idx2": lambda x, iy, ix: torch.ops.aten._unsafe_index(x, [None, None, iy, ix]) * 2,
      "idx2_nearest_like": lambda x, iy, ix: x[:, :, iy, ix] * 2}
for k, f in fs.items():
    torch._dynamo.reset()
    c = torch.compile(f, backend="zenith"); c(x, iy, ix)
    ts = {"eager": [], "zenith": []}
    for r in range(10):
        for n, fn in (("eager", f), ("zenith", c)):
            t = time.perf_counter(); fn(x, iy, ix); ts[n].append(time.perf_counter() - t)
    print(k, {n: "%.2f ms" % (1e3 * sorted(v)[5]) for n, v in ts.items()})
