# What a cold call pays (MobileNet V2 b1, zenith.freeze): calls back to back; each after the
# threads went quiet (the bench's settle); each after a 64 MiB buffer was written (caches
# evicted) and the quiet; each after the eviction with the model's weights read back in
# by this thread. Shuffled rounds. python cold_parts.py model batch [rounds]
import random, statistics, sys, time, torch, torchvision, zenith
from zenith.bench import stats
torch.manual_seed(0); torch.set_num_threads(2)
name, b = sys.argv[1], int(sys.argv[2]); rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 60
m = getattr(torchvision.models, name.replace("-", "_"))().eval(); x = torch.randn(b, 3, 224, 224)
f = zenith.freeze(m)
junk = torch.empty(64 << 18)  # 64 MiB of floats
params = [p for p in m.parameters()] + [bf for bf in m.buffers() if bf.is_floating_point()]
def evict(): junk.fill_(1.0)
def reread(): return sum(float(p.sum()) for p in params)
modes = {
    "back-to-back": lambda: None,
    "settled": lambda: stats.settle(),
    "evicted+settled": lambda: (evict(), stats.settle()),
    "evicted+weights+settled": lambda: (evict(), reread(), stats.settle()),
}
res = {k: [] for k in modes}
with torch.no_grad():
    for _ in range(10): f(x)
    for r in range(rounds):
        for k in random.sample(list(modes), len(modes)):
            f(x)  # the call before: each mode's call follows one of the model's
            modes[k](); t = time.perf_counter(); f(x); res[k].append(time.perf_counter() - t)
for k, v in res.items(): print(f"{k:26s} median {statistics.median(v)*1e3:.3f} ms  p10 {sorted(v)[len(v)//10]*1e3:.3f}")
