# Calls of a frozen encoder (encoder.py) for 12 s, for `perf record` over a profiling build (`make install-profiling`);
# prints "start" when the timed loop begins. python enc_perf.py bert|minilm [scheme: fp32, int8-dynamic, int8-static]
import sys, time
import torch, zenith
from encoder import encoder
m, ids = encoder(sys.argv[1] if len(sys.argv) > 1 else "minilm", sys.argv[2] if len(sys.argv) > 2 else "int8-static")
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(ids)
    print("start", flush=True)
    t = time.perf_counter(); n = 0
    while time.perf_counter() - t < 12: f(ids); n += 1
print((time.perf_counter() - t) / n * 1e3, "ms a call")
