# A/B in one process, interleaved: MobileNet V2 with the projections fused (new) against
# the same weights whose depthwise outputs are also kept by forward hooks (graph outputs,
# read twice, so each projection stays its own conv2d: the graph before 29e2f7d). The old
# variant is compiled through a wrapper module, so Dynamo keeps a cache entry of its own.
import sys, statistics, time, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b, rounds = int(sys.argv[1]), int(sys.argv[2])
m_new = torchvision.models.mobilenet_v2().eval()
m_old = torchvision.models.mobilenet_v2().eval()
m_old.load_state_dict(m_new.state_dict())
kept = {}
for i, blk in enumerate(m_old.features):
    if hasattr(blk, "conv"):
        dw = blk.conv[-3] if len(blk.conv) == 4 else blk.conv[0]  # the depthwise Conv-BN-ReLU6
        dw.register_forward_hook(lambda mod, inp, out, i=i: kept.__setitem__(i, out))


class Wrapper(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)


x = torch.randn(b, 3, 224, 224)
f = {"new": zenith.compile(m_new), "old": zenith.compile(Wrapper(m_old))}
wall = {"new": [], "old": []}
kern = {"new": [], "old": []}
with torch.no_grad():
    ref = m_new(x)
    for k in f:
        for _ in range(3): y = f[k](x)
        print(k, "max rel err", ((y - ref).abs().max() / ref.abs().max()).item())
    for r in range(rounds):
        for k in (("new", "old") if r % 2 == 0 else ("old", "new")):
            with zenith.profile() as p:
                t0 = time.perf_counter(); f[k](x); wall[k].append(time.perf_counter() - t0)
            kern[k].append(sum(s for _, s in p.table.values()))
            if r == 0: print(k, {op: c for op, (c, _) in p.table.items()})
for name, d in (("wall", wall), ("kernels", kern)):
    ratios = sorted(a / o for a, o in zip(d["new"], d["old"]))
    print(f"batch {b} {name}: new {statistics.median(d['new'])*1e3:.2f} ms, old {statistics.median(d['old'])*1e3:.2f} ms, "
          f"new/old per round: median {statistics.median(ratios):.3f}, p25 {ratios[len(ratios)//4]:.3f}, p75 {ratios[3*len(ratios)//4]:.3f}")
