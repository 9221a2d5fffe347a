# In-process A/B: Q, K and V as one GEMM (fuse_addmm_siblings) off / on, two frozen copies
# of one model compiled under ZENITH_ADDMM_SIBLINGS=0 / 1 (temporary switch), calls alternating in shuffled rounds.
import os, random, statistics, sys, time, torch, zenith, transformers
torch.manual_seed(0); torch.set_num_threads(2)
name, seq = sys.argv[1], int(sys.argv[2]); rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 30
cfg = transformers.BertConfig() if name == "bert" else transformers.BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = transformers.BertModel(cfg).eval(); ids = torch.randint(0, 1000, (1, seq))
fs = {}
with torch.no_grad():
    for k in ("0", "1"):
        os.environ["ZENITH_ADDMM_SIBLINGS"] = k; fs[k] = zenith.freeze(m); fs[k](ids)
    a, b = fs["0"](ids)[0], fs["1"](ids)[0]
    print("outputs bit-identical:", torch.equal(a, b), "max abs vs eager", (b - m(ids)[0]).abs().max().item())
    res = {k: [] for k in fs}
    for r in range(rounds):
        for k in random.sample(list(fs), 2):
            ts = []
            for _ in range(3):
                t = time.perf_counter(); fs[k](ids); ts.append(time.perf_counter() - t)
            res[k].append(statistics.median(ts))
rat = sorted(x / y for x, y in zip(res["1"], res["0"])); n = len(rat)
print(f"{name} s{seq}: off {statistics.median(res['0'])*1e3:.2f} ms, on {statistics.median(res['1'])*1e3:.2f} ms, on/off {rat[n//2]:.3f} [{rat[n//4]:.3f}, {rat[3*n//4]:.3f}] ({rounds} rounds)")
