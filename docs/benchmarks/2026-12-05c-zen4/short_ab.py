# The 32-byte window copies on and off in one process (short_knob.diff adds ZENITH_AB_NOSHORT=1, which turns them off;
# the committed code has no switch): an int8 7x7 stem 3 -> 64 alone. python short_ab.py BATCH ROUNDS
import sys, torch, zenith, importlib
sys.path.insert(0, "/work/main/docs/benchmarks/2026-12-05-zen5-cnn")
from abrounds import report, rounds, switched
torch.manual_seed(0); torch.set_num_threads(2)
Q = importlib.import_module("zenith.quant.quantize"); orig = Q._int8_conv_slower
Q._int8_conv_slower = lambda conv, isa=None: None if conv.in_channels <= 4 else orig(conv, isa)
b = int(sys.argv[1]); n = int(sys.argv[2])
m = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(64), torch.nn.ReLU()).eval()
x = torch.randn(b, 3, 224, 224)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
call = switched("ZENITH_AB_NOSHORT", lambda: f(x))
with torch.no_grad():
    a, c = call("1"), call("0")
    print("max abs diff between the two", (a - c).abs().max().item())
    res = rounds(["1", "0"], n, call)
report(f"int8 7x7 stem 3->64 b{b}", "ZENITH_AB_NOSHORT", ["1", "0"], res)
