# zenith.profile's op table of a frozen ResNet-50 (random init), fp32 and static INT8 (percentile 99.99, 4 random
# calibration batches of 2): python r50_ops.py BATCH
import sys, torch, torchvision, zenith, copy
torch.manual_seed(0); torch.set_num_threads(2)
b = int(sys.argv[1])
m = torchvision.models.resnet50().eval(); x = torch.randn(b, 3, 224, 224)
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=[(torch.randn(2, 3, 224, 224),) for _ in range(4)],
                    method="percentile", percentile=99.99)
for name, model in (("fp32", m), ("int8-static", q)):
    f = zenith.freeze(model)
    with torch.no_grad():
        for _ in range(3): f(x)
        with zenith.profile(trace="/dev/null") as p:
            for _ in range(10): f(x)
    print(name); print(p)
