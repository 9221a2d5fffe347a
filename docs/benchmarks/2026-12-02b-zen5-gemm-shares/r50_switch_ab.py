# ResNet-50 int8-static (frozen) with a temporary switch the C++ reads at every call (VAR set = the old way), the
# same model called with the variable set and unset in alternating rounds, at batch 1 and 8.
# python r50_switch_ab.py VAR [rounds]
import os, sys, copy, statistics, torch, torchvision, zenith
from zenith.bench.stats import paired_rounds, paired_ratio_ci
torch.manual_seed(0); torch.set_num_threads(2)
var = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
m = torchvision.models.resnet50().eval()
cal = [(torch.randn(8, 3, 224, 224),) for _ in range(4)]
q = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal))
def with_var(on):
    def f(*a):
        if on: os.environ[var] = "1"
        else: os.environ.pop(var, None)
        return q(*a)
    return f
for B in (1, 8):
    x = torch.randn(B, 3, 224, 224)
    with torch.no_grad():
        same = torch.equal(with_var(True)(x), with_var(False)(x))
        ts = paired_rounds({"old": with_var(True), "new": with_var(False)}, rounds, x)
    r, lo, hi = paired_ratio_ci(ts["old"], ts["new"])
    print(f"b{B} {var}: old {statistics.median(ts['old'])*1e3:.2f} ms, new {statistics.median(ts['new'])*1e3:.2f} ms; "
          f"new / old {r:.3f} [{lo:.3f}, {hi:.3f}]; outputs bit-identical: {same}")
os.environ.pop(var, None)
