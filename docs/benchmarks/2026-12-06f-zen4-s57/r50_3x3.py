# Per-node kernel time (zenith.profile, median of 10 calls, frozen) of ResNet-50's 3x3 stride-1 convs: int8-static as
# default (kept fp32 without VNNI, by Winograd) against int8_everywhere=True (int8). python r50_3x3.py BATCH
import sys, copy, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1])
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(2, 3, 224, 224),) for _ in range(4)]
from node_times import node_medians
res = {}
for name, kw in (("default", {}), ("everywhere", {"int8_everywhere": True})):
    f = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, **kw))
    res[name] = node_medians(f, x, 10, lambda op, node, shape: (node, op, shape))
for name in res:
    print(name, f"total {sum(res[name].values())/1e3:.2f} ms")
    for k, v in sorted(res[name].items(), key=lambda kv: -kv[1])[:60]:
        print(f"  {v/1e3:8.3f} ms  {k}")
