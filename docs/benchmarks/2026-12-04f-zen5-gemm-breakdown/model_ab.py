# In-process A/B of ZENITH_AB_DYN modes on a frozen encoder: per round each mode's median of 3 calls, shuffled order.
import os, random, statistics, sys, time, torch, zenith, transformers
torch.manual_seed(0); torch.set_num_threads(2)
name, seq, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 30
cfg = transformers.BertConfig() if name == "bert" else transformers.BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = transformers.BertModel(cfg).eval(); ids = torch.randint(0, 1000, (1, seq))
f = zenith.freeze(m)
res = {k: [] for k in modes}
with torch.no_grad():
    ref = m(ids).last_hidden_state
    for k in modes:
        os.environ["ZENITH_AB_DYN"] = k; out = f(ids)
        out = out["last_hidden_state"] if isinstance(out, dict) else out[0]
        print(k, "max abs diff vs eager", (out - ref).abs().max().item())
    for r in range(rounds):
        for k in random.sample(modes, len(modes)):
            os.environ["ZENITH_AB_DYN"] = k; ts = []
            for _ in range(3):
                t = time.perf_counter(); f(ids); ts.append(time.perf_counter() - t)
            res[k].append(statistics.median(ts))
b = res[modes[0]]
print(name, seq, f"{modes[0]}: {statistics.median(b)*1e3:.2f} ms")
for k in modes[1:]:
    rat = sorted(x / y for x, y in zip(res[k], b))
    n = len(rat)
    print(f"  {k}: {statistics.median(res[k])*1e3:.2f} ms, ratio {rat[n//2]:.3f} [{rat[n//4]:.3f}, {rat[3*n//4]:.3f}]")
