# One row of x, 5632 x 2048: GB/s with the weight hot (one weight, L3) and from memory (24 cycled),
# q4_0 against the experimental q4_0x8 (session 49's diff), rounds alternated. python hot8.py
import time, torch, statistics
from zenith import _C
from zenith.quant.formats import quantize_weight, interleave_x8
torch.set_num_threads(2); _C.set_num_threads(2)
torch.manual_seed(0)
N, K = 5632, 2048
x = torch.randn(1, K)
a = [quantize_weight(torch.randn(N, K), "q4_0") for _ in range(24)]
b = [interleave_x8(w) for w in a]
def rate(ws, fmt, calls):
    t = time.perf_counter()
    for i in range(calls): _C.qmatmul(x, ws[i % len(ws)], fmt)
    return ws[0].numel() * calls / (time.perf_counter() - t) / 1e9
res = {k: [] for k in ("q4_0 hot", "x8 hot", "q4_0 mem", "x8 mem")}
for rep in range(9):
    res["q4_0 hot"].append(rate(a[:1], "q4_0", 200)); res["x8 hot"].append(rate(b[:1], "q4_0x8", 200))
    res["q4_0 mem"].append(rate(a, "q4_0", 48)); res["x8 mem"].append(rate(b, "q4_0x8", 48))
print("; ".join(f"{k} {statistics.median(v):.1f} GB/s" for k, v in res.items()))
