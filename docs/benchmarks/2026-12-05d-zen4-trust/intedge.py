import torch, zenith
torch._dynamo.config.recompile_limit = 1000
a = torch.tensor([7, -7, 0, 2**62, -2**63 + 1, 5, -5, 1, -1, 3] * 3, dtype=torch.int64)
b = torch.tensor([2, 2, 3, -3, -1, -2, -2, 7, 7, 1] * 3, dtype=torch.int64)
z = b.clone(); z[3] = 0
ops = {"floordiv": lambda x, y: torch.div(x, y, rounding_mode="floor"), "truncdiv": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
       "remainder": torch.remainder, "fmod": torch.fmod, "mul": torch.mul, "add": torch.add, "sub": torch.sub, "max": torch.maximum,
       "truediv": torch.div, "abs": lambda x, y: torch.abs(x), "neg": lambda x, y: -x, "pow": lambda x, y: torch.pow(x, y.abs() % 4),
       "bitand": torch.bitwise_and, "shift": lambda x, y: x << (y.abs() % 8), "sum": lambda x, y: x.sum(), "cumsum": lambda x, y: x.cumsum(0)}
for n, f in ops.items():
    torch._dynamo.reset()
    want = f(a, b); got = zenith.compile(f)(a, b)
    ok = torch.equal(want, got) if want.dtype != torch.float32 else torch.allclose(want, got, equal_nan=True)
    print(f"{n:10s} {'ok' if ok and want.dtype == got.dtype else 'DIFF'} {want.dtype} {got.dtype}" + ("" if ok else f" eager {want[:10].tolist()} zenith {got[:10].tolist()}"))
for n in ("floordiv", "truncdiv", "remainder", "fmod"):
    torch._dynamo.reset()
    f = ops[n]
    try: want = f(a, z); we = None
    except Exception as e: we = f"{type(e).__name__}: {e}"
    try: got = zenith.compile(f)(a, z); ge = None
    except Exception as e: ge = f"{type(e).__name__}: {str(e)[:120]}"
    print(f"{n} by zero: eager {we or 'ok ' + str(want[3].item())} | zenith {ge or 'ok ' + str(got[3].item())}")
