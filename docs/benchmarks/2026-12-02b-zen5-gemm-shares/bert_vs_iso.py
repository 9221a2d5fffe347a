# BERT-base frozen: each GEMM shape's in-model GFLOP/s (Profile.gemm_rates) beside the same shape alone, in one
# process, three rounds. python bert_vs_iso.py
import os, sys, time, torch, transformers, zenith
from zenith import _C
from zenith.bench.machine import zenith_mm
torch.set_num_threads(2); _C.set_num_threads(2); torch.manual_seed(0)
m = transformers.BertModel(transformers.BertConfig()).eval()
ids = torch.randint(0, 30000, (1, 128)); am = torch.ones_like(ids)
f = zenith.freeze(m)
iso = {}
for (mm, n, k) in [(128, 768, 3072), (128, 3072, 768), (128, 768, 768)]:
    iso[(mm, n, k)] = zenith_mm(torch.randn(mm, k), torch.randn(k, n), True)
with torch.no_grad():
    for _ in range(3): f(ids, am)
    for r in range(3):
        t0 = time.perf_counter(); f(ids, am); t_model = time.perf_counter() - t0
        with zenith.profile(trace=os.devnull) as p:
            f(ids, am)
        rows = {(g["m"], g["n"], g["k"]): g for g in p.gemm_rates()}
        line = [f"model {t_model*1e3:.1f} ms"]
        for s, fn in iso.items():
            fn(); t0 = time.perf_counter()
            for _ in range(5): fn()
            ti = (time.perf_counter() - t0) / 5
            line.append(f"{s}: in-model {rows[s]['gflops']:.0f} iso {2*s[0]*s[1]*s[2]/ti/1e9:.0f}")
        print("; ".join(line))
