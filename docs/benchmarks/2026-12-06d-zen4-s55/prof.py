# Kernel profile of an encoder (random init, seq 128) frozen by Zenith: python prof.py minilm|bert fp32|int8-dynamic
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-06c-zen4-s54"))
import torch, zenith
from encoder import encoder
m, ids = encoder(sys.argv[1], sys.argv[2])
with torch.no_grad():
    f = zenith.freeze(m)
    for _ in range(20): f(ids)
    with zenith.profile() as p:
        for _ in range(40): f(ids)
print(p)
