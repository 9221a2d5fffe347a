"""BERT-base or MiniLM (random init, real config) at 128 tokens: zenith.quantize "int8"
(activations per 32 values) against "int8-dynamic" (one scale per row on AVX-512 VNNI)
and fp32, all compiled with Zenith in one process, interleaved rounds; per-round ratio
medians. python row_vs_block.py {bert,minilm} ROUNDS"""
import copy, statistics, sys, time, torch, zenith
from transformers import BertConfig, BertModel
from zenith import _C

torch.manual_seed(0)
torch.set_num_threads(2)
name, rounds = sys.argv[1], int(sys.argv[2])
cfg = BertConfig() if name == "bert" else BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                                     intermediate_size=1536)
base = BertModel(cfg).eval()
inp = dict(input_ids=torch.randint(0, 30000, (1, 128)), attention_mask=torch.ones(1, 128, dtype=torch.long))
models = {"fp32": torch.compile(base, backend="zenith")}
for s in ("int8", "int8-dynamic"):
    models[s] = torch.compile(zenith.quantize(copy.deepcopy(base), s), backend="zenith")
times = {k: [] for k in models}
with torch.no_grad():
    ref = base(**inp).last_hidden_state
    for k, c in models.items():
        y = c(**inp).last_hidden_state
        print(f"{k}: max |y - fp32 eager| {(y - ref).abs().max().item():.3e} of {ref.abs().max().item():.2f}")
    n = 5 if name == "bert" else 15
    for r in range(rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        for k in order:
            ts = []
            for _ in range(n):
                t0 = time.perf_counter()
                models[k](**inp)
                ts.append(time.perf_counter() - t0)
            times[k].append(statistics.median(ts))
med = {k: statistics.median(v) for k, v in times.items()}
ratio = lambda a, b: statistics.median([x / y for x, y in zip(times[a], times[b])])
print(f"{name} s128, qmatmul ISA {_C.qmatmul_isa('int8')}, {rounds} rounds: " +
      ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in med.items()) +
      f"; int8-dynamic / int8 {ratio('int8-dynamic', 'int8'):.3f}, int8-dynamic / fp32 {ratio('int8-dynamic', 'fp32'):.3f}")
