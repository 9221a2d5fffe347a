# In-process A/B of the weight-rows GEMM's X^T handling (the session's temporary switch ZENITH_AB_XT, read at every
# call: 0 = as before, 1 = packing split across threads, unset = that and whole panels of a transposed X read in
# place). One frozen model, calls alternated in shuffled order per round; per-round ratio of each variant to "0",
# median [p25, p75], outputs compared. python xt_ab.py minilm|bert SEQ ROUNDS
import os, sys, random, time, statistics, torch, transformers, zenith
torch.manual_seed(0); torch.set_num_threads(2)
which, s, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if which == "minilm":
    from zenith.demo import load_minilm
    _, m = load_minilm()
else:
    m = transformers.BertModel(transformers.BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, s)); mask = torch.ones_like(ids)
f = zenith.freeze(m)
variants = {"0": "0", "1": "1", "2": None}
def call(v):
    if variants[v] is None: os.environ.pop("ZENITH_AB_XT", None)
    else: os.environ["ZENITH_AB_XT"] = variants[v]
    t0 = time.perf_counter(); y = f(ids, mask); return time.perf_counter() - t0, y
with torch.no_grad():
    outs = {v: call(v)[1].last_hidden_state for v in variants}
    print("max |diff| to '0':", {v: (outs[v] - outs["0"]).abs().max().item() for v in variants})
    for _ in range(5):
        for v in variants: call(v)
    t = {v: [] for v in variants}
    for r in range(rounds):
        order = list(variants); random.shuffle(order)
        for v in order:
            reps = [call(v)[0] for _ in range(3)]
            t[v].append(statistics.median(reps))
def q(v, p): v = sorted(v); return v[int(p * (len(v) - 1))]
for v in variants:
    rat = [a / b for a, b in zip(t[v], t["0"])]
    print(f"{which} s{s} variant {v}: median {statistics.median(t[v])*1e3:.3f} ms, / '0' {statistics.median(rat):.4f} [{q(rat,.25):.4f}, {q(rat,.75):.4f}]")
