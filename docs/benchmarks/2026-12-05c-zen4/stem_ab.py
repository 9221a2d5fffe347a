# In-process A/B: static INT8 torchvision model with its stem (<= 4 channels in) kept fp32 or quantized,
# whatever zenith.quantize's rule says. python stem_ab.py BATCH [ROUNDS [MODEL]] (MODEL: resnet50).
import copy, sys, torch, torchvision, zenith
sys.path.insert(0, "/work/main/docs/benchmarks/2026-12-05-zen5-cnn")
from abrounds import report, rounds
import importlib; Q = importlib.import_module("zenith.quant.quantize")
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
name = sys.argv[3] if len(sys.argv) > 3 else "resnet50"
base = getattr(torchvision.models, name)().eval(); x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(2, 3, 224, 224),) for _ in range(4)]
fs = {}
orig = Q._int8_conv_slower
with torch.no_grad():
    ref = base(x)
    for v in ("fp32-stem", "int8-stem"):
        m = copy.deepcopy(base)
        if v == "int8-stem":
            Q._int8_conv_slower = lambda conv, isa=None: None if conv.in_channels <= 4 else orig(conv, isa)
        else:
            Q._int8_conv_slower = lambda conv, isa=None: "kept" if conv.in_channels <= 4 else orig(conv, isa)
        zenith.quantize(m, "int8-static", calibration=cal)
        Q._int8_conv_slower = orig
        fs[v] = zenith.freeze(m)
        y = fs[v](x)
        print(v, "max abs diff vs fp32 eager", round((y - ref).abs().max().item(), 3),
              "top1 agree", (y.argmax(1) == ref.argmax(1)).float().mean().item())
    res = rounds(list(fs), n, lambda v: fs[v](x))
report(f"{name} int8-static b{b}", "stem", list(fs), res)
