# One small parallel Zenith op (relu over 1M floats, frozen): back to back against after stats.settle.
import time, statistics, torch, zenith
from zenith.bench import stats
torch.set_num_threads(2)
class M(torch.nn.Module):
    def forward(self, x): return torch.relu(x) * 2
x = torch.randn(1 << 20); f = zenith.freeze(M().eval(), example_inputs=(x,)) if 'example_inputs' in zenith.freeze.__code__.co_varnames else zenith.freeze(M().eval())
res = {"b2b": [], "settled": []}
with torch.no_grad():
    for _ in range(5): f(x)
    for _ in range(100):
        f(x); t = time.perf_counter(); f(x); res["b2b"].append(time.perf_counter() - t)
        stats.settle(); t = time.perf_counter(); f(x); res["settled"].append(time.perf_counter() - t)
for k, v in res.items(): print(k, f"median {statistics.median(v)*1e6:.0f} us  p90 {stats.quantile(v, 0.9)*1e6:.0f} us")
