# NaN / infinity masks of Zenith (frozen) against eager on the zoo's CNN prefixes: a
# non-finite input value must reach the outputs eager's ops give it, no more or fewer.
import torch, torchvision, zenith, itertools
torch.manual_seed(0)
r50 = torchvision.models.resnet50().eval(); mb = torchvision.models.mobilenet_v2().eval(); r18 = torchvision.models.resnet18().eval()
cases = {
    "r50 stem..layer1": torch.nn.Sequential(r50.conv1, r50.bn1, r50.relu, r50.maxpool, r50.layer1),
    "r50 layer2": torch.nn.Sequential(*list(r50.layer2)),
    "r50 layer3": torch.nn.Sequential(*list(r50.layer3)[:3]),
    "r18 layer1..2": torch.nn.Sequential(r18.layer1, r18.layer2),
    "mbv2 features[:5]": mb.features[:5],
    "mbv2 features[10:15]": mb.features[10:15],
}
shapes = {"r50 stem..layer1": (3, 112), "r50 layer2": (256, 56), "r50 layer3": (512, 28), "r18 layer1..2": (64, 56),
          "mbv2 features[:5]": (3, 112), "mbv2 features[10:15]": (64, 14)}
bad = 0
for name, m in cases.items():
    m.eval()
    C, H = shapes[name]
    for batch, val in itertools.product((1, 3), ("nan", "inf", "-inf")):
        x = torch.randn(batch, C, H, H)
        x[0, C // 2, H // 3, H - 1] = float(val)
        if batch > 1: x[2, 0, 0, H // 2] = float(val)
        with torch.no_grad():
            want = m(x); got = zenith.freeze(m)(x)
        same = torch.equal(want.isnan(), got.isnan()) and torch.equal(want.isinf(), got.isinf()) and \
            torch.equal(want[want.isinf()], got[want.isinf()])
        fin = want.isfinite() & got.isfinite()
        err = ((want[fin] - got[fin]).abs().max() / want[fin].abs().max().clamp_min(1e-6)).item() if fin.any() else 0.0
        if not same or err > 1e-3: bad += 1
        print(f"{name:22s} b{batch} {val:4s} nan {int(want.isnan().sum()):7d} {int(got.isnan().sum()):7d} inf {int(want.isinf().sum()):6d} {int(got.isinf().sum()):6d} {'ok' if same else 'DIFF'} rel err {err:.1e}", flush=True)
print("cases differing:", bad)
