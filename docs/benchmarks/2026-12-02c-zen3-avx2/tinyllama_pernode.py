# TinyLlama-1.1B config (random init) greedy decode per op kind, fp32 / int8 / int4 (zenith.quantize, torch.compile
# backend="zenith"): the profiled events of one-row (decode-step) ops over N generated tokens after a 16-token prompt,
# summed per op and shape. python tinyllama_pernode.py [tokens] [schemes]
import copy, collections, os, sys, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
schemes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["fp32", "int8", "int4"]
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16))
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
for s in schemes:
    m = copy.deepcopy(base) if s == "fp32" else zenith.quantize(copy.deepcopy(base), s)
    m.forward = torch.compile(m.forward, backend="zenith")
    with torch.no_grad():
        m.generate(ids, **kw)
        with zenith.profile(trace=os.devnull) as p:
            m.generate(ids, **kw)
    by = collections.defaultdict(lambda: [0, 0.0])
    for op, node, graph, tid, ts, dur, shape in p.events:
        if shape and len(shape) >= 2 and shape[-2] == 1:  # one row: the decode steps' ops
            by[(op, tuple(shape))][0] += 1; by[(op, tuple(shape))][1] += dur / 1e3
    total = sum(t for _, t in by.values())
    print(f"== {s}: decode-step ops {total / n:.2f} ms a token")
    for (op, shape), (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:12]:
        print(f"  {op:<16} {str(shape):<22} x{c // n:<4} {t / n:7.3f} ms a token")
    del m
