# Each int8 GEMM shape's in-model rate (zenith.profile) for an encoder: python qrates.py bert|minilm SCHEME
import os, sys, torch, zenith
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06c-zen4-s54"))
from encoder import encoder
name, scheme = sys.argv[1], sys.argv[2]
m, ids = encoder(name, scheme)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(10): f(ids)
    with zenith.profile(trace="/dev/null") as p:
        for _ in range(40): f(ids)
print(p)
for r in p.gemm_rates(40):
    print(f"{r['op']:>12} {r['m']}x{r['n']}x{r['k']}: {r['per_call']:.0f}/call median {r['median_us']:.1f} us "
          f"{r['gflops']/2:.1f} GMAC/s ({r['gflops']/4:.1f} a core) total {r['total_us']/1e3:.2f} ms")
