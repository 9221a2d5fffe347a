"""MobileNet V2 training step (batch 8, 112 px): one compiled copy, its depthwise backward on small maps
by channel lanes or by rows, toggled per call by TMP_NO_LANES, a switch that existed only in the build
measured (conv2d_grad.cc read getenv("TMP_NO_LANES") at the dispatch; not committed). Usage: dw_lanes_ab.py ROUNDS."""
import copy, os, statistics as st, sys, time, torch, torchvision
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-07a-zen4-s59"))
import train_ab
rounds=int(sys.argv[1]); name=sys.argv[2] if len(sys.argv)>2 else "mobilenet_v2"
torch.manual_seed(0)
m = getattr(torchvision.models, name)(num_classes=1000).train()
for mod in m.modules():
    if isinstance(mod, torch.nn.Dropout): mod.p = 0.0
x = torch.randn(8, 3, 112, 112)
step = train_ab.stepper(x, lambda o: o.pow(2).mean())
want = step((m, m))
c = copy.deepcopy(m); fz = train_ab.compiled(c)
got = step((c, fz)); assert abs(got - want) <= 1e-4 * abs(want) + 1e-6
def arm(env):
    def run():
        if env: os.environ["TMP_NO_LANES"] = "1"
        else: os.environ.pop("TMP_NO_LANES", None)
        return step((c, fz))
    return run
runs = {"eager": lambda: step((m, m)), "rows": arm(True), "lanes": arm(False)}
for _ in range(2):
    for f in runs.values(): f()
t = {k: [] for k in runs}
for _ in range(rounds):
    for k, f in runs.items():
        t0 = time.perf_counter(); f(); t[k].append(time.perf_counter() - t0)
for k, v in t.items(): print(f"  {k:8s} {st.median(v)*1e3:8.1f} ms / eager {train_ab.ratio(v, t['eager'])}")
print(f"  lanes / rows per round {train_ab.ratio(t['lanes'], t['rows'])}")
