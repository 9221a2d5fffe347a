# Special values through Zenith against eager: NaN positions, infinities, and the sign of zero.
import torch, zenith, math
F = torch.nn.functional
torch._dynamo.config.recompile_limit = 1000
vals = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e30, -1e30, 88.8, -88.8, 1e-40, -1e-40, 3.0, -3.0, 0.5, -0.5, 1.0, -1.0, 2.0]
x = torch.tensor(vals * 4)
y = torch.tensor(list(reversed(vals)) * 4)
unary = {
 "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "sqrt": torch.sqrt,
 "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
 "erf": torch.erf, "relu": F.relu, "relu6": F.relu6, "hardtanh": F.hardtanh, "silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
 "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid, "elu": F.elu, "leaky": F.leaky_relu, "softplus": F.softplus,
 "mish": F.mish, "selu": F.selu, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
 "sign": torch.sign, "reciprocal": torch.reciprocal, "square": torch.square, "clamp": lambda t: t.clamp(-1, 1),
 "clamp_min": lambda t: t.clamp_min(0), "mul0": lambda t: t * 0, "add0": lambda t: t + 0.0, "sub0": lambda t: t - 0.0,
 "div2": lambda t: t / 2, "pow3": lambda t: t ** 3, "pow05": lambda t: t ** 0.5, "exp2": torch.exp2, "expm1": torch.expm1,
 "log2": torch.log2, "atan": torch.atan, "asinh": lambda t: torch.asinh(t), "frac": torch.frac, "logsigmoid": F.logsigmoid,
}
binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "max": torch.maximum, "min": torch.minimum,
          "pow": torch.pow, "atan2": torch.atan2, "fmod": torch.fmod, "remainder": torch.remainder, "where": lambda a, b: torch.where(a > b, a, b),
          "floordiv": lambda a, b: torch.div(a, b, rounding_mode="floor"), "truncdiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
          "hypot": torch.hypot, "copysign": torch.copysign}
reduce = {"sum": lambda t: t.view(4, 18).sum(1), "mean": lambda t: t.view(4, 18).mean(1), "amax": lambda t: t.view(4, 18).amax(1),
          "amin": lambda t: t.view(4, 18).amin(1), "max_dim": lambda t: t.view(4, 18).max(1).values, "argmax": lambda t: t.view(4, 18).argmax(1).float(),
          "argmin": lambda t: t.view(4, 18).argmin(1).float(), "softmax": lambda t: t.view(4, 18).softmax(1), "logsumexp": lambda t: t.view(4, 18).logsumexp(1),
          "cumsum": lambda t: t.cumsum(0), "prod": lambda t: t.view(4, 18).prod(1), "norm": lambda t: t.view(4, 18).norm(dim=1),
          "var": lambda t: t.view(4, 18).var(1), "maxpool": lambda t: F.max_pool1d(t.view(1, 4, 18), 3, 2), "avgpool": lambda t: F.avg_pool1d(t.view(1, 4, 18), 3, 2)}
def judge(name, want, got):
    want, got = want.float(), got.float()
    nan = torch.equal(want.isnan(), got.isnan())
    fin = ~want.isnan() & ~got.isnan()
    eq = torch.isclose(got[fin], want[fin], rtol=2e-5, atol=1e-30) | (got[fin] == want[fin])
    zs = (want[fin] == 0) & (got[fin] == 0)
    sign = torch.equal(torch.signbit(want[fin][zs]), torch.signbit(got[fin][zs]))
    if nan and bool(eq.all()) and sign: return
    i = (~((got == want) & (torch.signbit(got) == torch.signbit(want)) | (got.isnan() & want.isnan()))).nonzero().view(-1)[:4].tolist()
    print(f"{name:10s} nan_ok {nan} vals_ok {bool(eq.all())} zero_sign_ok {sign} at {i}: eager {[want.view(-1)[j].item() for j in i]} zenith {[got.view(-1)[j].item() for j in i]}")
for n, f in unary.items():
    torch._dynamo.reset(); judge(n, f(x), zenith.compile(f)(x))
for n, f in binary.items():
    torch._dynamo.reset(); judge(n, f(x, y), zenith.compile(f)(x, y))
for n, f in reduce.items():
    torch._dynamo.reset(); judge(n, f(x), zenith.compile(f)(x))
print("done")
