# frozen call after the change (f(x): positional key, pinned weights) against the old path in the same process
# (FrozenModel's pytree key + the unpinned call over [*bound, x] + unflatten), shuffled order per round.
import random, torch, torchvision, zenith, statistics, time, sys
from torch.utils import _pytree as pytree
from zenith.freeze import _leaf_key
torch.manual_seed(0); torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "mobilenet_v2"
m = getattr(torchvision.models, name)().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad(): f(x)
fr = next(iter(f._graphs.values()))
bound = fr.bound; unpinned = fr.graph._call
graphs = {}
def old(*args, **kwargs):
    leaves, spec = pytree.tree_flatten((args, kwargs))
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in leaves): raise RuntimeError
    if torch.is_autocast_enabled("cpu"): raise RuntimeError
    key = (spec, tuple(map(_leaf_key, leaves)))
    with f._lock:
        g = graphs.setdefault(key, fr)
        graphs.get(key)
    outs = unpinned([*bound, *leaves])
    return pytree.tree_unflatten(list(outs), fr.out_spec)
with torch.no_grad():
    assert torch.equal(old(x), f(x))
fns = dict(new=lambda: f(x), old=lambda: old(x))
res = {k: [] for k in fns}
with torch.no_grad():
    for r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1000):
        order = list(fns.items()); random.shuffle(order)
        for k, fn in order:
            t = time.perf_counter(); fn(); res[k].append(time.perf_counter() - t)
d = [a - b for a, b in zip(res["new"], res["old"])]
q = statistics.quantiles(d, n=4)
print(name, {k: round(statistics.median(v) * 1e3, 4) for k, v in res.items()}, "new - old us: median", round(statistics.median(d) * 1e6, 1), "quartiles", [round(v * 1e6, 1) for v in q])
