# In-process A/B of batch-slice settings: one frozen copy of a torchvision model per setting
# (environment variables set during that copy's first call, when its plan is built), calls
# alternated in shuffled rounds (../2026-12-05-zen5-cnn/abrounds.py). Settings: "off" (ZENITH_BATCH_SLICE_CACHE=0),
# "rule" (the default), a number (ZENITH_BATCH_SLICE_CACHE: the cache bytes the rule
# assumes), "v3" (ZAB_RULE), or "S:LAST[:BYTES]" (ZAB_S / ZAB_LAST: images a pass and last
# node, and ZENITH_BATCH_SLICE_BYTES the budget): temporary switches of the session's
# earlier rules, in slice_overrides.diff; the committed runtime ignores them.
# python slice_ab.py model batch setting,setting,... [rounds [scheme]]; ratios are time / the
# first's; scheme: a zenith.quantize scheme applied first (int8-static: calibrated on 4
# random batches of 2).
import copy, os, sys, torch, torchvision, zenith
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-05-zen5-cnn"))
from abrounds import report, rounds  # the rounds the forty-fourth session's A/B scripts share
torch.manual_seed(0); torch.set_num_threads(2)
name, b, vals = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
n = int(sys.argv[4]) if len(sys.argv) > 4 else 20
m = getattr(torchvision.models, name.replace("-", "_"))().eval()
x = torch.randn(b, 3, 224, 224)
if len(sys.argv) > 5:
    cal = [torch.randn(2, 3, 224, 224) for _ in range(4)] if sys.argv[5] == "int8-static" else None
    zenith.quantize(m, sys.argv[5], **({"calibration": cal} if cal else {}))
KEYS = ("ZENITH_BATCH_SLICE_CACHE", "ZENITH_BATCH_SLICE_BYTES", "ZAB_S", "ZAB_LAST", "ZAB_RULE")
fs = {}
with torch.no_grad():
    ref = m(x)
    for v in vals:
        for k in KEYS: os.environ.pop(k, None)
        if v == "off": os.environ["ZENITH_BATCH_SLICE_CACHE"] = "0"
        elif v.isdigit(): os.environ["ZENITH_BATCH_SLICE_CACHE"] = v
        elif v == "v3": os.environ["ZAB_RULE"] = "3"
        elif v != "rule":
            s, last, *budget = v.split(":"); os.environ["ZAB_S"] = s; os.environ["ZAB_LAST"] = last
            if budget: os.environ["ZENITH_BATCH_SLICE_BYTES"] = budget[0]
        fs[v] = zenith.freeze(copy.deepcopy(m))
        print(f"{v}: max abs diff vs eager {(fs[v](x) - ref).abs().max().item():.3g}", flush=True)
    for k in KEYS: os.environ.pop(k, None)
    res = rounds(vals, n, lambda v: fs[v](x))
report(f"{name} b{b}", "setting", vals, res)
