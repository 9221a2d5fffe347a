# NaN / +-inf in the inputs of chains of 3x3 convs on 64-512 channels (Winograd-sized), eager against
# zenith.freeze: NaN and inf masks and the finite values.
import torch, zenith
torch.manual_seed(0)
for C, H, batch in [(64, 56, 1), (64, 14, 2), (128, 28, 8), (512, 7, 3)]:
    m = torch.nn.Sequential(torch.nn.Conv2d(C, C, 3, padding=1), torch.nn.BatchNorm2d(C), torch.nn.ReLU(),
                            torch.nn.Conv2d(C, C, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(C, C, 3, padding=1)).eval()
    f = zenith.freeze(m)
    print(zenith.explain(m, torch.randn(batch, C, H, H)).zenith_ops)
    for val in ["nan", "inf", "-inf"]:
        x = torch.randn(batch, C, H, H); x[0, 1, 5, 5] = float(val); x[-1, 2, H - 1, 3] = float(val)
        with torch.no_grad():
            want = m(x); got = f(x)
        same = torch.equal(want.isnan(), got.isnan()) and torch.equal(want.isinf(), got.isinf()) and torch.equal(want[want.isinf()], got[got.isinf()])
        fin = want.isfinite() & got.isfinite()
        err = ((want[fin] - got[fin]).abs().max() / want[fin].abs().max()).item()
        print(C, H, batch, val, "nan", int(want.isnan().sum()), int(got.isnan().sum()), "inf", int(want.isinf().sum()), int(got.isinf().sum()), "ok" if same else "DIFF", f"{err:.2e}")
