# TinyLlama-1.1B config decode, fp32 and int4 compiled: per weight op (shape) the time per call
# and the GB/s it streams, from zenith.profile over 16 decode steps. python opbw.py
import collections, os, time, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 16
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
import sys
for scheme in sys.argv[1:] or ("fp32", "int4"):
    import copy
    m = copy.deepcopy(base) if scheme == "fp32" else zenith.quantize(copy.deepcopy(base), "int4", group_size=int(scheme[6:])) if scheme.startswith("int4-g") else zenith.quantize(copy.deepcopy(base), scheme)
    m.forward = torch.compile(m.forward, backend="zenith")
    with torch.no_grad():
        m.generate(ids, **kw)
        with zenith.profile(trace=os.devnull) as p:
            t0 = time.perf_counter(); m.generate(ids, **kw); wall = time.perf_counter() - t0
    ev = p.events
    graphs = collections.Counter(e[2] for e in ev)
    big = max(graphs, key=graphs.get)
    by = collections.defaultdict(lambda: [0, 0.0])
    for op, node, graph, tid, ts, dur, shape in ev:
        if graph == big: by[(op, str(shape))][0] += 1; by[(op, str(shape))][1] += dur / 1e3
    tot = sum(t for _, t in by.values())
    print(f"{scheme}: wall {wall*1e3:.1f} ms for {n} tokens, decode graph op time {tot/(n-1):.2f} ms a token")
    for (op, shape), (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:14]:
        print(f"  {op:<12} {shape[:70]:<70} x{c:<5} {t/c*1e3:8.1f} us a call {t/(n-1):7.3f} ms a token")
    del m
