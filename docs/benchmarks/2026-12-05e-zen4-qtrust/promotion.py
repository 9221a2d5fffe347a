"""Type promotion and integer wrap-around against eager: binary ops over pairs of dtypes
(and Python scalars), values chosen to overflow the narrow integer types; result dtype
and values compared (integers exactly)."""
import itertools
import warnings

import torch

import zenith

warnings.filterwarnings("ignore")
torch.manual_seed(0)
D = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
     torch.float32, torch.float64]


def sample(dt):
    if dt == torch.bool:
        return torch.tensor([True, False, True, True, False, True])
    if dt.is_floating_point:
        return torch.tensor([1.5, -2.25, 100.0, -0.0, 7.0, 3.0]).to(dt)
    info = torch.iinfo(dt)
    vals = [info.max, info.min, 3, -7 if info.min < 0 else 7, 100, 1]
    return torch.tensor(vals, dtype=torch.int64).to(dt)


OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b if a.dtype != torch.bool or
    (isinstance(b, torch.Tensor) and b.dtype != torch.bool) else a ^ b,
    "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "floordiv": lambda a, b: torch.floor_divide(a, b), "max": lambda a, b: torch.maximum(a, b),
    "lt": lambda a, b: a < b, "where": lambda a, b: torch.where(a > 0 if a.dtype != torch.bool else a, a, b),
    "mul_scalar": lambda a, b: a * 3, "add_float_scalar": lambda a, b: a + 2.5, "neg_pow2": lambda a, b: a * a - a,
}
bad = []
n = 0
for (name, op), da, db in itertools.product(OPS.items(), D, D):
    if name in ("mul_scalar", "add_float_scalar", "neg_pow2") and db != D[0]:
        continue
    a, b = sample(da), sample(db)
    try:
        want = op(a, b)
    except Exception:
        continue  # eager refuses: not compared
    if isinstance(want, torch.Tensor) and want.dtype.is_floating_point and name == "floordiv":
        pass
    torch._dynamo.reset()
    n += 1
    try:
        got = torch.compile(op, backend="zenith")(a, b)
    except Exception as e:
        bad.append(f"{name} {da} {db}: raised {type(e).__name__}: {str(e).splitlines()[0][:100]}")
        continue
    if got.dtype != want.dtype:
        bad.append(f"{name} {da} {db}: dtype {got.dtype} vs eager {want.dtype}")
    elif want.dtype.is_floating_point:
        tol = {torch.float16: 1e-3, torch.bfloat16: 1e-2}.get(want.dtype, 1e-6)
        if not torch.allclose(got.double(), want.double(), rtol=tol, atol=tol, equal_nan=True):
            bad.append(f"{name} {da} {db}: {got.tolist()} vs eager {want.tolist()}")
    elif not torch.equal(got, want):
        bad.append(f"{name} {da} {db}: {got.tolist()} vs eager {want.tolist()}")
print(f"{n} op/dtype cases compared, {len(bad)} differ")
for line in bad:
    print(" ", line)
