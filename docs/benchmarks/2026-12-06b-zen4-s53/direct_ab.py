# ResNet-50 int8-static (random init, calibrated on 4 random batches of 2), frozen: AVX-512's direct rows (new:
# each 3x3 window read in place from a padded copy of the input codes) against window rows (old:
# ZENITH_INT8_DIRECT=0, read per conv call), flipped between calls in random order each round; per-round ratio
# new / old, and the outputs compared. python direct_ab.py BATCH [rounds]
import sys, torch, torchvision, zenith
from env_ab import alternate, summary, switched
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1]) if len(sys.argv) > 1 else 1
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
zenith.quantize(m, "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)])
f = zenith.freeze(m)
call = switched("ZENITH_INT8_DIRECT", lambda: f(x))
with torch.no_grad():
    a, _ = call("new"); c, _ = call("old")
    print("max |new - old|", (a - c).abs().max().item(), "top-1 equal", bool((a.argmax(1) == c.argmax(1)).all()))
    res = alternate(call, rounds)
print(f"resnet50 int8-static b{b}: {summary(res)}, {rounds} rounds")
