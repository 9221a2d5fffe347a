# Two frozen copies of one static-INT8 ResNet-50, compiled with a temporary switch read when a graph is
# compiled (ZB_NOPOOL set: chain_int8 leaves the stem's max pool float) and without; calls alternated in one
# process, per-pair ratios new/old; the outputs compared. python pool_ab.py BATCH [pairs]
import copy, os, sys, time, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 60
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
with torch.no_grad():
    os.environ["ZB_NOPOOL"] = "1"; fo = zenith.freeze(copy.deepcopy(m)); yo = fo(x)
    os.environ.pop("ZB_NOPOOL"); fn = zenith.freeze(m); yn = fn(x)
    print("max |new - old|", (yn - yo).abs().max().item(), " top-1 equal", bool((yn.argmax(1) == yo.argmax(1)).all()))
    for _ in range(5): fn(x); fo(x)
    def t(f):
        s = time.perf_counter(); f(x); return time.perf_counter() - s
    r = []; tn = []; to = []
    for i in range(pairs):
        if i % 2: a = t(fn); o = t(fo)
        else: o = t(fo); a = t(fn)
        r.append(a / o); tn.append(a); to.append(o)
q = statistics.quantiles(r, n=10)
print(f"b{b}: new {statistics.median(tn)*1e3:.2f} ms, old {statistics.median(to)*1e3:.2f} ms, "
      f"new/old {statistics.median(r):.3f} [{q[0]:.3f}, {q[-1]:.3f}] (p10, p90), {pairs} pairs")
