"""int8 (zenith.quantize) against fp32, both compiled with Zenith in one process, calls
interleaved: per-round median ratio. python int8_vs_fp32.py {bert,minilm} ROUNDS"""
import sys, torch, zenith, transformers, time, copy, statistics as st
torch.manual_seed(0)
which = sys.argv[1]
if which == "bert":
    m = transformers.BertModel(transformers.BertConfig()).eval()
else:
    from zenith.demo import load_minilm
    _, m = load_minilm()
ids = torch.randint(1000, 20000, (1, 128))
q = copy.deepcopy(m); zenith.quantize(q, "int8")
cf = torch.compile(m, backend="zenith"); cq = torch.compile(q, backend="zenith")
ts = {"fp32": [], "int8": []}
with torch.no_grad():
    for _ in range(3): cf(ids); cq(ids)
    for _ in range(int(sys.argv[2])):
        for k, f in (("fp32", cf), ("int8", cq)):
            t = time.perf_counter(); f(ids); ts[k].append(time.perf_counter() - t)
r = [a / b for a, b in zip(ts["int8"], ts["fp32"])]
print({k: round(st.median(v) * 1e3, 2) for k, v in ts.items()}, "ratio median", round(st.median(r), 3))
