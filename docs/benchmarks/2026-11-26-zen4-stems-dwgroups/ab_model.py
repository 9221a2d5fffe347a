# In-process A/B of one switch of ab_switches.diff on a whole torchvision model: the same
# compiled model, interleaved rounds, the switch's env var unset (new) and set (old) per
# call; per-round ratio medians, and max error against eager relative to max |eager|.
# From the repository root, after `git apply` of ab_switches.diff and
# `make .venv/.zenith-installed`:
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_model.py mobilenet-v2 8 40 ZC
import os, sys, time, torch, zenith, torchvision, statistics as st
torch.set_num_threads(2)
name, N, R, var = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
m = (torchvision.models.resnet50() if name == "resnet50" else torchvision.models.mobilenet_v2()).eval()
x = torch.randn(N, 3, 224, 224)
with torch.no_grad():
    ref = m(x); f = zenith.compile(m)
    res = [[], []]; err = [0, 0]
    for r in range(R):
        for i in (0, 1):
            if i: os.environ[var] = "1"
            else: os.environ.pop(var, None)
            t = time.perf_counter(); y = f(x); res[i].append(time.perf_counter() - t)
            err[i] = ((y - ref).abs().max() / ref.abs().max()).item()
med = [st.median(v[3:]) * 1e3 for v in res]
rat = sorted(a / b for a, b in zip(res[0][3:], res[1][3:]))
print(f"{name} b{N}: new {med[0]:.2f} ms, old ({var}=1) {med[1]:.2f} ms; new/old per round median {st.median(rat):.3f} (p25 {rat[len(rat)//4]:.3f}, p75 {rat[3*len(rat)//4]:.3f}); max err vs eager relative to max |eager| {err[0]:.2e} / {err[1]:.2e}")
