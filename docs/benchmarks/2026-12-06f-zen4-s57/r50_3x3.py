# Per-node kernel time (zenith.profile, median of 10 calls, frozen) of ResNet-50's 3x3 stride-1 convs: int8-static as
# default (kept fp32 without VNNI, by Winograd) against int8_everywhere=True (int8). python r50_3x3.py BATCH
import sys, copy, collections, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1])
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
cal = [(torch.randn(2, 3, 224, 224),) for _ in range(4)]
res = {}
for name, kw in (("default", {}), ("everywhere", {"int8_everywhere": True})):
    f = zenith.freeze(zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, **kw))
    per = collections.defaultdict(list)
    with torch.no_grad():
        for _ in range(3): f(x)
        for _ in range(10):
            with zenith.profile(trace="/dev/null") as p:
                f(x)
            call = collections.defaultdict(float)
            for op, node, graph, tid, ts, dur, shape in p.events:
                call[(node, op, tuple(shape))] += dur
            for k, v in call.items(): per[k].append(v)
    res[name] = {k: statistics.median(v) for k, v in per.items()}
for name in res:
    print(name, f"total {sum(res[name].values())/1e3:.2f} ms")
    for k, v in sorted(res[name].items(), key=lambda kv: -kv[1])[:60]:
        print(f"  {v/1e3:8.3f} ms  {k}")
