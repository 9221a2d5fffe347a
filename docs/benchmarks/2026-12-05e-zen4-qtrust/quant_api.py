"""zenith.quantize misused as a user might: twice on one model, empty or NaN calibration,
a bfloat16 / float16 model, a model on the meta device, an impossible error budget, a
model with no quantizable layer, calibration batches of another shape. Each either
works (checked against eager) or raises an error that says why; nothing crashes or
returns silent garbage."""
import warnings

import torch
from torch import nn

import zenith

warnings.simplefilter("ignore")
torch.manual_seed(0)


def mlp(dtype=torch.float32):
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(dtype).eval()


def probe(name, fn):
    try:
        r = fn()
        print(f"{name:<44} {'ok' if r is None else r}")
    except Exception as e:
        print(f"{name:<44} raised {type(e).__name__}: {str(e).splitlines()[0][:150]}")


x = torch.randn(4, 64)


def twice():
    m = mlp()
    zenith.quantize(m, "int8")
    y1 = m(x)
    zenith.quantize(m, "int4")
    y2 = m(x)
    return None if torch.equal(y1, y2) else "second call changed the model"


def empty_cal():
    zenith.quantize(mlp(), "int8-static", calibration=[])


def nan_cal():
    m = mlp()
    cal = [torch.randn(4, 64), torch.full((4, 64), float("nan"))]
    zenith.quantize(m, "int8-static", calibration=cal)
    y = m(x)
    return None if torch.isfinite(y).all() else f"non-finite output {y.flatten()[:3].tolist()}"


def inf_cal():
    m = mlp()
    cal = [torch.randn(4, 64), torch.full((4, 64), float("inf"))]
    zenith.quantize(m, "int8-static", calibration=cal)
    y = m(x)
    ref = mlp()
    return None if torch.isfinite(y).all() else "non-finite output"


def low_precision(dtype):
    def f():
        m = mlp(dtype)
        ref = m(x.to(dtype)).float()
        zenith.quantize(m, "int8")
        y = m(x.to(dtype))
        c = torch.compile(m, backend="zenith")(x.to(dtype))
        if y.dtype != dtype or c.dtype != dtype:
            return f"dtype {y.dtype} / {c.dtype}"
        err = (y.float() - ref).abs().max() / ref.abs().max()
        return None if err < 0.05 and torch.allclose(c.float(), y.float(), rtol=2e-2, atol=2e-2) else f"error {err:.3g}"
    return f


def meta_model():
    with torch.device("meta"):
        m = mlp()
    zenith.quantize(m, "int8")


def impossible_budget():
    m = mlp()
    s = zenith.quantize(m, "int8-static", calibration=[torch.randn(4, 64)], max_error=1e-12)
    return f"kept {len(zenith.quant.summary(m).kept)} layers fp32"


def nothing_to_quantize():
    m = nn.Sequential(nn.ReLU(), nn.Tanh())
    zenith.quantize(m, "int8")
    return "no error, no layer"


def cal_other_shape():
    m = mlp()
    zenith.quantize(m, "int8-static", calibration=[torch.randn(2, 64), torch.randn(7, 3, 64)])
    return None if torch.isfinite(m(x)).all() else "non-finite"


def cal_generator_once():
    m = mlp()
    zenith.quantize(m, "int8-static", calibration=(torch.randn(4, 64) for _ in range(3)), method="entropy")
    return None if torch.isfinite(m(x)).all() else "non-finite"


def training_mode_grad():
    m = mlp().train()
    zenith.quantize(m, "int4")
    xi = x.clone().requires_grad_()
    m(xi).sum().backward()
    return None if xi.grad is not None and torch.isfinite(xi.grad).all() else "no input grad"


for name, fn in [("quantize twice (int8 then int4)", twice), ("int8-static, empty calibration", empty_cal),
                 ("int8-static, a NaN calibration batch", nan_cal), ("int8-static, an inf calibration batch", inf_cal),
                 ("bfloat16 model, int8", low_precision(torch.bfloat16)),
                 ("float16 model, int8", low_precision(torch.float16)), ("model on the meta device", meta_model),
                 ("max_error=1e-12", impossible_budget), ("no quantizable layer", nothing_to_quantize),
                 ("calibration batches of other shapes", cal_other_shape),
                 ("calibration as a generator, entropy", cal_generator_once),
                 ("training mode, gradient to the input", training_mode_grad)]:
    probe(name, fn)
