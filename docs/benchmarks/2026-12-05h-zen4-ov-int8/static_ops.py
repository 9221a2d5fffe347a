# Zenith's ops in BERT-base seq 128 for int8-dynamic and int8-static (the bench's encoder
# calibration: minmax, smooth 0.85), one process, each op's total over 5 profiled calls.
# python static_ops.py [batches]
import copy, sys, time, torch, transformers, zenith
from zenith.bench.inference import token_batches, ENCODER_STATIC
torch.set_num_threads(2); torch.manual_seed(0)
model = transformers.BertModel(transformers.BertConfig()).eval()
x = (torch.randint(0, 30000, (1, 128)), torch.ones(1, 128, dtype=torch.long))
cal = token_batches(1, 128, 0, 30000, samples=int(sys.argv[1]) if len(sys.argv) > 1 else 100)
ms = {"int8-dynamic": zenith.quantize(copy.deepcopy(model), "int8-dynamic"),
      "int8-static": zenith.quantize(copy.deepcopy(model), "int8-static", calibration=cal, **ENCODER_STATIC)}
with torch.no_grad():
    for k, m in ms.items():
        c = zenith.compile(m)
        for _ in range(3): c(*x)
        ts = []
        for _ in range(5):
            t = time.perf_counter(); c(*x); ts.append(time.perf_counter() - t)
        with zenith.profile() as p:
            for _ in range(5): c(*x)
        print(f"== {k}: median call {sorted(ts)[2]*1e3:.1f} ms (5 calls profiled below)")
        print(p)
        print(zenith.explain(m) if False else "")
