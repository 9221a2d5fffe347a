import sys, torch
sys.path.insert(0, "tests/python/quant")
from quant_util import random_weight
from zenith.quant.formats import FORMATS
from zenith.quant.ops import reference_linear, qlinear, qconv2d, reference_conv2d
from zenith.quant.formats import quantize_weight
torch.manual_seed(0)
for fmt in FORMATS:
    for v in ([dict(), dict(row_scale=True)] if fmt == "int8" else [dict()]):
        w = random_weight(fmt, 64, 1024, seed=1)
        first = None
        for e in range(20, 39):
            for M in (1, 9, 64):
                x = torch.randn(M, 1024)
                x[:, 5] = 3.0 * 10.0 ** e
                y = qlinear(x, w, None, fmt, **v); want = reference_linear(x, w, None, fmt)
                if ((~torch.isfinite(y)) & torch.isfinite(want)).any():
                    first = (e, M); break
            if first: break
        print(fmt, v, "first overflow at 3e%d (M=%d)" % first if first else "none to 3e38")
wf = torch.randn(16, 16, 3, 3) * 0.1
wq = quantize_weight(wf.reshape(16, -1), "int8")
for e in range(20, 39):
    x = torch.randn(1, 16, 9, 9); x[0, 0, 4, 4] = 3.0 * 10.0 ** e
    y = qconv2d(x, wq, None, [3, 3], [1, 1], [1, 1], [1, 1], None)
    want = reference_conv2d(x, wq, None, (3, 3), (1, 1), (1, 1), (1, 1), None)
    if ((~torch.isfinite(y)) & torch.isfinite(want)).any():
        print("qconv2d dynamic first overflow at 3e%d" % e); break
