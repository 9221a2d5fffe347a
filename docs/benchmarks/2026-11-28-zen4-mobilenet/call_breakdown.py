import os  # per-call events are kept only with a trace; it goes to os.devnull
import torch, time, zenith, torchvision, sys
from zenith import backend as zb
torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "mobilenet_v2"
m = getattr(torchvision.models, name)().eval(); xi = torch.randn(1,3,224,224)
captured = []
def be(gm, ex, **kw):
    fn = zb.zenith_backend(gm, ex, **kw)
    def wrap(*args):
        captured.append(args)
        return fn(*args)
    captured.append(fn)
    return wrap
c = torch.compile(m, backend=be)
with torch.no_grad():
    c(xi)
    fn = captured[0]; args = captured[1]
    ns = fn.__closure__[0].cell_contents.__globals__
    run0 = ns["_run0"]; chk = ns["_weights"].check
    T = {"run": [], "check": [], "span": []}
    def run_t(*a):
        t = time.perf_counter(); r = run0(*a); T["run"].append(time.perf_counter() - t); return r
    class W:
        def check(self, a):
            t = time.perf_counter(); r = chk(a); T["check"].append(time.perf_counter() - t); return r
    ns["_run0"] = run_t; ns["_weights"] = W()
    for _ in range(5): fn(*args)
    for k in T: T[k].clear()
    tot = []
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(40):
            t = time.perf_counter(); fn(*args); tot.append(time.perf_counter() - t)
    evs = sorted(p.events, key=lambda e: e[4]); k = len(evs) // 40
    spans = sorted((evs[(i+1)*k-1][4] + evs[(i+1)*k-1][5] - evs[i*k][4]) for i in range(40))
    md = lambda v: sorted(v)[len(v)//2] * 1e6
    print(f"total {md(tot):.0f} us; run_raw {md(T['run']):.0f}; node span {spans[20]:.0f}; weights.check {md(T['check']):.0f}")
