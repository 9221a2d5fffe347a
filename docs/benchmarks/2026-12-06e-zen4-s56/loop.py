# Run an encoder's frozen call in a loop for perf: python loop.py minilm|bert SCHEME SECONDS
import os, sys, time, torch, zenith
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06c-zen4-s54"))
from encoder import encoder
m, ids = encoder(sys.argv[1], sys.argv[2])
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(10): f(ids)
    print("ready", flush=True)
    t = time.time()
    while time.time() - t < float(sys.argv[3]): f(ids)
