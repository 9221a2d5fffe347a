# In-process A/B of a pass, off / on: two frozen copies (pass_switch.two_copies), calls alternating in shuffled rounds.
# Usage: pass_ab.py ZENITH_GEMM_HANDOFF|ZENITH_ADDMM_SIBLINGS bert|minilm SEQ [ROUNDS]
import random, statistics, sys, time, torch
from pass_switch import two_copies
env, name, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]); rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 30
m, ids, fs = two_copies(env, name, seq)
with torch.no_grad():
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
