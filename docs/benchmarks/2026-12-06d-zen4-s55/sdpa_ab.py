# One sdpa alone (frozen), a switch read per call (VAR=0 / 1) alternated in shuffled rounds.
# python sdpa_ab.py VAR [H L E rounds]
import os, sys, time, statistics, random, torch, zenith
import torch.nn.functional as F
torch.manual_seed(0); torch.set_num_threads(2)
var = sys.argv[1]
H, L, E = (int(a) for a in sys.argv[2:5]) if len(sys.argv) > 4 else (12, 128, 32)
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 400
class A(torch.nn.Module):
    def forward(self, q, k, v): return F.scaled_dot_product_attention(q, k, v)
q, k, v = (torch.randn(1, H, L, E) for _ in range(3))
f = zenith.freeze(A().eval())
def call(val):
    os.environ[var] = val
    s = time.perf_counter(); o = f(q, k, v); return o, time.perf_counter() - s
with torch.no_grad():
    a, _ = call("0"); b, _ = call("1"); print("identical:", torch.equal(a, b))
    t = {"0": [], "1": []}
    for _ in range(20): call("0"); call("1")
    for _ in range(rounds):
        for val in random.sample(["0", "1"], 2): t[val].append(call(val)[1])
r = sorted(x / y for x, y in zip(t["0"], t["1"]))
print(f"H {H} L {L} E {E} {'AVX2' if os.environ.get('ZENITH_NO_AVX512') else 'default'}: {var}=0 {statistics.median(t['0'])*1e6:.1f} us, "
      f"=1 {statistics.median(t['1'])*1e6:.1f} us; 0 / 1 per round {statistics.median(r):.3f} [{r[len(r)//10]:.3f}, {r[-len(r)//10-1]:.3f}]")
