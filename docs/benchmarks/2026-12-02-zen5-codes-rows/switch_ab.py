# ResNet-50 int8-static (zenith.freeze, one model) with a change on and off, paired: each round runs `calls` calls
# of each in rotating order, the figure is the median of the per-round ratios on / off. The switch is a temporary
# environment variable the C++ reads per call (ZENITH_EXP_PM_OFF: pm_switch.diff; ZENITH_EXP_TOT_OFF:
# tot_switch.diff), not in the committed code. python switch_ab.py <variable> <batch> [rounds] [calls]
import os, sys, copy, time, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
VAR = sys.argv[1]; B = int(sys.argv[2]); rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 15
calls = int(sys.argv[4]) if len(sys.argv) > 4 else 5
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
f = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal))
def timed(off):
    if off: os.environ[VAR] = "1"
    else: os.environ.pop(VAR, None)
    ts = []
    for _ in range(calls):
        t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
with torch.no_grad():
    a = f(x); os.environ[VAR] = "1"; b = f(x); os.environ.pop(VAR)
    assert torch.equal(a, b), "outputs differ"
    for _ in range(3): timed(False); timed(True)
    ratios, on_ms, off_ms = [], [], []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        t = {o: timed(o) for o in order}
        ratios.append(t[False] / t[True]); on_ms.append(t[False]); off_ms.append(t[True])
q = statistics.quantiles(ratios, n=4)
print(f"resnet50 int8-static b{B}: on / off ({VAR}) {statistics.median(ratios):.3f} [p25 {q[0]:.3f}, p75 {q[2]:.3f}]"
      f" ({statistics.median(on_ms)*1e3:.2f} vs {statistics.median(off_ms)*1e3:.2f} ms), outputs bit-identical")
