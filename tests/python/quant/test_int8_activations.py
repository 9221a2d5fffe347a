"""INT8 weights and activations: the qconv2d custom op and QConv2d against the torch
reference (fake-quantized activations against de-quantized filters), qlinear with a
static scale, calibration (observer, the three methods), zenith.quantize's int8-dynamic
and int8-static schemes on small CNNs and an MLP (compiled against the same quantized
model in eager, tight; against fp32, loose), the per-layer report, the error budget, and
bad input."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import zenith
from zenith import _C
from zenith.quant import QConv2d, QLinear, dequantize, quantize_weight, summary
from zenith.quant import calibrate as cal
from zenith.quant.ops import fake_quant_act, reference_conv2d
from quant_util import assert_same_model_close

ISAS = ["scalar", "avx2"] + [i for i in ("avxvnni", "avx512vnni") if _C.qmatmul_isa_supported(i)]

# (N, C, H, W, OC, kernel, stride, padding, dilation)
CONVS = [
    (1, 3, 17, 19, 37, (7, 7), (2, 2), (3, 3), (1, 1)),
    (2, 64, 9, 9, 64, (3, 3), (1, 1), (1, 1), (1, 1)),
    (3, 40, 9, 11, 70, (1, 1), (1, 1), (0, 0), (1, 1)),
    (1, 32, 7, 7, 16, (1, 1), (1, 1), (0, 0), (1, 1)),
    (1, 16, 10, 10, 33, (3, 5), (2, 1), (1, 2), (2, 1)),
]


def conv_operands(N, C, H, W, OC, k, seed=0, int8_max=127):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, C, H, W, generator=g)
    w = quantize_weight(torch.randn(OC, C * k[0] * k[1], generator=g), "int8", int8_max)
    return x, w, torch.randn(OC, generator=g)


# 7-bit filters against an input after a ReLU: AVX2's w7 tiles (two steps' products summed
# in 16 bits) where the input has no negative code.
@pytest.mark.parametrize("shape", CONVS, ids=lambda s: "x".join(map(str, s[:5])) + f"-k{s[5][0]}{s[5][1]}")
@pytest.mark.parametrize("x_scale", [None, 0.02], ids=["dynamic", "static"])
@pytest.mark.parametrize("weights", ["int8", "int7-relu"])
def test_qconv2d_matches_reference(shape, x_scale, weights):
    N, C, H, W, OC, k, st, pd, dl = shape
    x, w, b = conv_operands(N, C, H, W, OC, k, int8_max=127 if weights == "int8" else 63)
    if weights == "int7-relu":
        x = x.relu()
        assert w[:, 4:].view(torch.int8).abs().max() == 63
    want = reference_conv2d(x, w, b, k, st, pd, dl, x_scale)
    for isa in ISAS:
        got = _C.qconv2d(x, w, b, list(k), list(st), list(pd), list(dl), x_scale, isa)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4, msg=isa)
    got = torch.ops.zenith.qconv2d(x, w, None, list(k), list(st), list(pd), list(dl), x_scale)
    torch.testing.assert_close(got, reference_conv2d(x, w, None, k, st, pd, dl, x_scale), rtol=1e-5, atol=1e-4)


def test_qconv2d_compiled_is_one_native_conv():
    conv = torch.nn.Conv2d(8, 12, 3, padding=1, bias=False)
    m = torch.nn.Sequential(QConv2d.from_float(conv, 0.05), torch.nn.ReLU()).eval()
    x = torch.randn(2, 8, 10, 10)
    rep = zenith.explain(m, x)
    assert rep.fallback_ops == {} and rep.zenith_ops == {"conv2d": 1}, rep
    assert "0: conv2d, int8, activations static x_scale 0.05" in str(rep)
    with torch.no_grad():
        assert_same_model_close(torch.compile(m, backend="zenith")(x), m(x))


def test_qconv2d_bad_input_gives_clear_errors():
    x, w, b = conv_operands(1, 4, 6, 6, 8, (3, 3))
    op = torch.ops.zenith.qconv2d
    with pytest.raises(ValueError, match="36 codes per row; 4 channels x kernel 3x2 need 24"):
        op(x, w, b, [3, 2], [1, 1], [0, 0], [1, 1], None)
    with pytest.raises(ValueError, match="x_scale must be a positive finite number"):
        op(x, w, b, [3, 3], [1, 1], [0, 0], [1, 1], 0.0)
    with pytest.raises(ValueError, match="x_scale must be a positive finite number"):
        op(x, w, b, [3, 3], [1, 1], [0, 0], [1, 1], float("nan"))
    with pytest.raises(ValueError, match="with a finite inverse"):  # 1 / 1e-40 overflows a float
        op(x, w, b, [3, 3], [1, 1], [0, 0], [1, 1], 1e-40)
    with pytest.raises(ValueError, match="stride must be 2 values >= 1"):
        op(x, w, b, [3, 3], [0, 1], [0, 0], [1, 1], None)
    with pytest.raises(ValueError, match="kernel is larger than the padded input"):
        op(x[..., :2, :2], w, b, [3, 3], [1, 1], [0, 0], [1, 1], None)
    with pytest.raises(ValueError, match="x must be NCHW"):
        op(x[0], w, b, [3, 3], [1, 1], [0, 0], [1, 1], None)
    with pytest.raises(ValueError):
        op(x, w[:, :10], b, [3, 3], [1, 1], [0, 0], [1, 1], None)
    with pytest.raises(ValueError, match="bias must be \\[8\\]"):
        _C.qconv2d(x, w, b[:3], [3, 3], [1, 1], [0, 0], [1, 1], None)
    with pytest.raises(TypeError, match="x must be a float32"):
        _C.qconv2d(x.double(), w, b, [3, 3], [1, 1], [0, 0], [1, 1], None)


def test_qconv2d_nan_reaches_only_the_windows_that_read_it():
    x, w, b = conv_operands(1, 8, 8, 8, 4, (3, 3))
    x[0, 2, 3, 4] = float("nan")
    for x_scale in (None, 0.03):
        y = torch.ops.zenith.qconv2d(x, w, b, [3, 3], [1, 1], [1, 1], [1, 1], x_scale)
        nan = torch.isnan(y[0, 0])
        assert nan[2:5, 3:6].all() and int(nan.sum()) == 9
        finite = ~torch.isnan(y)
        ref = reference_conv2d(x.nan_to_num(0.0), w, b, (3, 3), (1, 1), (1, 1), (1, 1), x_scale)
        torch.testing.assert_close(y[finite], ref[finite], rtol=1e-5, atol=1e-4)


def test_qlinear_static_scale_matches_reference():
    lin = torch.nn.Linear(64, 48)
    q = QLinear.from_float(lin, "int8", x_scale=0.03)
    x = torch.randn(5, 7, 64) * 2
    want = fake_quant_act(x, 0.03) @ dequantize(q.weight, "int8").t() + lin.bias.detach()
    with torch.no_grad():
        torch.testing.assert_close(q(x), want, rtol=1e-5, atol=1e-5)
        assert_same_model_close(torch.compile(q, backend="zenith")(x), q(x))
    with pytest.raises(ValueError, match="x_scale .* needs int8 weights"):
        QLinear.from_float(lin, "q4_0", x_scale=0.03)
    with pytest.raises(ValueError, match="x_scale must be a positive finite number"):
        torch.ops.zenith.qlinear(x, q.weight, None, "int8", -1.0)


def fake_quant_rows(x, qmax, per_row, block=32):
    """x as qlinear's int8 activations see it: each row on one scale max|x| / qmax
    (per_row), else each block of `block` values on its own; codes round(x * (1 / s)) on the
    row scale, round(x * (qmax / max)) on a block's, as the kernels compute them."""
    if per_row:
        amax = x.abs().amax(-1, keepdim=True)
        s = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
        return torch.clamp(torch.round(x * (1 / s)), -qmax, qmax) * s
    k = x.shape[-1]
    kp = (k + block - 1) // block * block
    xb = F.pad(x, (0, kp - k)).unflatten(-1, (kp // block, block))
    amax = xb.abs().amax(-1, keepdim=True)
    inv = torch.where(amax > 0, qmax / amax, torch.zeros_like(amax))
    q = torch.clamp(torch.round(xb * inv), -qmax, qmax) * (amax / qmax)
    return q.flatten(-2)[..., :k]


def test_qlinear_row_scale_matches_reference():
    # int8-dynamic's linear layers: one activation scale per row where the CPU's int8
    # GEMM profits (_C.qmatmul_row_scales()), else per block (_C.qmatmul_act_block: 64
    # values on AVX2 from 8 rows, else 32); eager (the dot kernels)
    # and compiled (18 rows: the packed GEMM) against the torch reference on the same codes
    torch.manual_seed(0)
    lin = torch.nn.Linear(100, 48)
    q = QLinear.from_float(lin, "int8", row_scale=True)
    x = torch.randn(2, 9, 100) * torch.linspace(0.1, 4, 100)
    x[0, 3] = 0.0
    qmax, block = _C.qmatmul_act_max("int8", 18), _C.qmatmul_act_block("int8", 18, True)  # (AVX2: 63, 64)
    want = fake_quant_rows(x, qmax, _C.qmatmul_row_scales(), block) @ dequantize(q.weight, "int8").t() + lin.bias.detach()
    with torch.no_grad():
        torch.testing.assert_close(q(x), want, rtol=1e-5, atol=1e-5)
        compiled = torch.compile(q, backend="zenith")
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
        x[1, 2, 5] = float("nan")  # that row is NaN throughout, the others as they were
        y, yc = q(x), compiled(x)
    for got in (y, yc):
        assert torch.isnan(got[1, 2]).all() and not torch.isnan(got[1, :2]).any() and not torch.isnan(got[0]).any()
        torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    label = "dynamic per row" if _C.qmatmul_row_scales() else "dynamic"  # as this CPU runs it
    assert "row_scale" in repr(q) and summary(torch.nn.Sequential(q)).layers[0].activations == label
    with pytest.raises(ValueError, match="row_scale .* needs int8 weights and no x_scale"):
        QLinear.from_float(torch.nn.Linear(64, 8), "q4_0", row_scale=True)
    with pytest.raises(ValueError, match="row_scale .* needs int8 weights and no x_scale"):
        QLinear.from_float(lin, "int8", x_scale=0.5, row_scale=True)
    with pytest.raises(ValueError, match="row_scale .* needs int8 weights and no x_scale"):
        torch.ops.zenith.qlinear(x, q.weight, None, "int8", 0.5, True)


def test_observer_percentile_and_minmax_match_torch():
    g = torch.Generator().manual_seed(0)
    o = cal.Observer()
    xs = [torch.randn(1000, generator=g) * (i + 1) for i in range(5)]  # the range grows: histograms merge
    for x in xs:
        o.add(x)
    a = torch.cat(xs).abs()
    assert o.total == a.numel() and o.amax == float(a.max())
    assert o.threshold("minmax") == float(a.max())
    width = o.range / cal.BINS
    for p in (50.0, 99.0, 99.99):
        # the upper edge of the first bin by which p% of the values are in
        t = o.threshold("percentile", p)
        assert float((a <= t).double().mean()) >= p / 100 > float((a < t - width).double().mean()), p
    # the entropy threshold clips a heavy tail: inside (0, max]
    assert 0 < o.threshold("entropy") <= o.amax
    o.add(torch.tensor([float("nan"), float("inf")]))
    assert o.nonfinite == 2 and o.amax == float(a.max())


def test_observer_takes_any_float_layout_and_counts_zeros_apart():
    g = torch.Generator().manual_seed(1)
    x = torch.relu(torch.randn(64, 48, generator=g))  # about half exact zeros
    flat, strided, half = cal.Observer(), cal.Observer(), cal.Observer()
    flat.add(x)
    strided.add(x.t())  # not contiguous
    half.add(x.to(torch.bfloat16))
    assert flat.zeros == int((x == 0).sum()) > 0 and flat.total == x.numel()
    assert torch.equal(flat.counts, strided.counts) and flat.amax == strided.amax
    assert half.zeros == flat.zeros and half.total == x.numel()
    want = torch.histc(x[x > 0], bins=cal.BINS, min=0, max=flat.range).double()
    assert torch.equal(flat.counts, want)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 5), (128, 768, 33), (3, 40, 300)])
@pytest.mark.parametrize("bias", [True, False])
def test_zenith_linear_matches_torch(m, k, n, bias):
    g = torch.Generator().manual_seed(m * 1000 + k + n)
    x, w = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
    b = torch.randn(n, generator=g) if bias else None
    torch.testing.assert_close(_C.linear(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-5 * k ** 0.5)


def test_zenith_linear_bad_input_gives_clear_errors():
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    with pytest.raises(ValueError, match="x must be"):
        _C.linear(x, torch.randn(3, 9), None)
    with pytest.raises(ValueError, match="bias must be"):
        _C.linear(x, w, torch.randn(4))
    with pytest.raises(TypeError, match="float32"):
        _C.linear(x.double(), w, None)
    with pytest.raises(ValueError, match="contiguous"):
        _C.linear(torch.randn(8, 4).t(), w, None)


def test_zenith_linears_compute_the_layers_and_keep_hooks_then_restore_them():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 30), torch.nn.GELU(), torch.nn.Linear(30, 7, bias=False))
    x = torch.randn(2, 5, 20)
    with torch.no_grad():
        want = model(x)
    seen, calls = [], []
    model[2].register_forward_pre_hook(lambda _m, args: seen.append(args[0].shape))
    real = _C.linear

    def counting(*a):
        calls.append(a[0].shape)
        return real(*a)

    with cal.zenith_linears(model), torch.no_grad():
        cal._C.linear = counting
        try:
            got = model(x)
        finally:
            cal._C.linear = real
        assert model(x.double().float()[:, :0]).shape == (2, 0, 7)  # empty: torch's linear
    assert calls == [(10, 20), (10, 30)] and seen == [(2, 5, 30), (2, 0, 30)]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert all("forward" not in m.__dict__ for m in model)
    with cal.zenith_linears(model):  # with autograd on: torch's linear, gradients as ever
        model(x).sum().backward()
    assert model[0].weight.grad is not None and "forward" not in model[0].__dict__


def test_zenith_linears_leave_what_they_do_not_cover_to_torch():
    torch.manual_seed(1)

    class MyLinear(torch.nn.Linear):
        def forward(self, input):
            return super().forward(input) * 2

    plain, sub, own = torch.nn.Linear(8, 4), MyLinear(8, 4), torch.nn.Linear(8, 4)
    own.forward = lambda input: torch.zeros(3)  # set on the instance before: kept
    model = torch.nn.ModuleList([plain, sub, own])
    x = torch.randn(5, 8)
    calls = []
    real = _C.linear
    cal._C.linear = lambda *a: calls.append(a[0].shape) or real(*a)
    try:
        with cal.zenith_linears(model), torch.no_grad():
            torch.testing.assert_close(plain(input=x), F.linear(x, plain.weight, plain.bias))  # keyword, as nn.Linear
            assert len(calls) == 1
            torch.testing.assert_close(sub(x), F.linear(x, sub.weight, sub.bias) * 2)  # a subclass: its own forward
            assert torch.equal(own(x), torch.zeros(3)) and len(calls) == 1
            with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast: torch's bf16 linear, as without the context
                y = plain(x)
            assert y.dtype == torch.bfloat16 and len(calls) == 1
            with pytest.raises(RuntimeError):  # 0-d input: nn.Linear's error
                plain(torch.tensor(1.0))
            with cal.zenith_linears(model):  # nested: the inner one patches nothing, restores nothing
                plain(x)
            assert "forward" in plain.__dict__ and len(calls) == 2
    finally:
        cal._C.linear = real
    assert "forward" not in plain.__dict__ and "forward" in own.__dict__


def test_entropy_clips_outliers_more_than_minmax():
    g = torch.Generator().manual_seed(1)
    o = cal.Observer()
    x = torch.randn(100000, generator=g)
    x[:5] = 60.0  # a few far outliers
    o.add(x)
    assert o.threshold("entropy") < 0.5 * o.threshold("minmax")
    assert o.threshold("percentile", 99.9) < 5


def small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        # 8 input channels: quantized (a stem on <= 4 stays fp32 without VNNI, where int8 is slower)
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1, groups=4), torch.nn.ReLU(),  # grouped: stays float
        torch.nn.Conv2d(32, 24, 1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(24, 10)).eval()


def batches(n, seed=5, shape=(2, 8, 16, 16)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) for _ in range(n)]


@pytest.mark.parametrize("scheme, kw", [("int8-dynamic", {}),
                                        ("int8-static", {"method": "percentile"}),
                                        ("int8-static", {"method": "minmax"}),
                                        ("int8-static", {"method": "entropy"})],
                         ids=["dynamic", "percentile", "minmax", "entropy"])
def test_quantize_cnn_compiled_matches_eager(scheme, kw):
    m = small_cnn()
    if scheme == "int8-static":
        kw = dict(kw, calibration=batches(4))
    with pytest.warns(UserWarning, match="1 layer\\(s\\) stay in floating point: 6 \\(a grouped conv"):
        q = zenith.quantize(copy.deepcopy(m), scheme, **kw)
    s = summary(q)
    kinds = sorted((layer.kind, layer.activations) for layer in s.layers)
    acts = "static" if scheme == "int8-static" else "dynamic"
    lin = "static" if acts == "static" else "dynamic per row" if _C.qmatmul_row_scales() else "dynamic"
    assert kinds == [("conv2d", acts)] * 3 + [("linear", lin)], kinds
    assert list(s.kept) == ["6"]
    if scheme == "int8-static":
        assert all(layer.x_scale > 0 and 0 <= layer.error < 0.05 for layer in s.layers), s.layers
    x = batches(1, seed=9)[0]
    want = compiled_vs_eager(q, x)
    with torch.no_grad():
        ref = m(x)
    cos = F.cosine_similarity(want.flatten(), ref.flatten(), dim=0).item()
    assert cos > 0.99, cos
    rep = zenith.explain(q, x)
    assert rep.fallback_ops == {}, rep.fallback_ops


def test_int8_slower_rule():
    from zenith.quant.quantize import _int8_conv_slower

    pw, stem, k3 = torch.nn.Conv2d(16, 32, 1), torch.nn.Conv2d(3, 16, 3), torch.nn.Conv2d(16, 16, 3, padding=1)
    # a stem on <= 4 channels stays fp32, except on AVX-512 VNNI one of 4096+ products a pixel
    resnet_stem = torch.nn.Conv2d(3, 64, 7, stride=2, padding=3)  # 9408
    for isa in ("avx2", "scalar", "avxvnni"):
        assert "not AVX-512 VNNI" in _int8_conv_slower(stem, isa)
        assert "not AVX-512 VNNI" in _int8_conv_slower(resnet_stem, isa)
    assert "432 products" in _int8_conv_slower(stem, "avx512vnni")
    assert "4032 products" in _int8_conv_slower(torch.nn.Conv2d(4, 112, 3), "avx512vnni")
    assert _int8_conv_slower(torch.nn.Conv2d(4, 128, 3), "avx512vnni") is None  # 4608
    assert _int8_conv_slower(resnet_stem, "avx512vnni") is None
    assert _int8_conv_slower(torch.nn.Conv2d(5, 16, 3), "avx2") is None  # 5 channels: not a stem
    assert _int8_conv_slower(pw) is None  # (1x1 convs over 56 x 56 maps too, since the blocked int8 conv)
    assert _int8_conv_slower(k3) is None
    assert _int8_conv_slower(torch.nn.Conv2d(8, 8, 3, groups=8)) is None  # grouped: QConv2d says why
    # without VNNI, a 3x3 stride-1 conv over 64+ channels (fp32's Winograd) stays fp32
    wino = torch.nn.Conv2d(64, 64, 3, padding=1)
    for isa in ("avx2", "scalar"):
        assert "Winograd" in _int8_conv_slower(wino, isa)
        assert "Winograd" in _int8_conv_slower(torch.nn.Conv2d(64, 128, 3, padding="same"), isa)
        for other in (torch.nn.Conv2d(64, 64, 3, stride=2, padding=1), torch.nn.Conv2d(32, 64, 3, padding=1),
                      torch.nn.Conv2d(64, 64, 3, padding=2, dilation=2), torch.nn.Conv2d(64, 64, 1)):
            assert _int8_conv_slower(other, isa) is None, other
    for isa in ("avx512vnni", "avxvnni"):
        assert _int8_conv_slower(wino, isa) is None


def test_quantize_keeps_convs_where_int8_is_slower():
    # a small stem on 3 channels stays fp32, listed in .kept with the reason and no
    # warning; the 1x1 convs (over 56 x 56 too) and the 3x3 convs are quantized;
    # int8_everywhere=True quantizes them all
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, stride=2, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 8, 1)).eval()
    data = batches(2, shape=(1, 3, 56, 56))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=data)
        d = zenith.quantize(copy.deepcopy(m), "int8-dynamic")
    s = summary(q)
    assert sorted(layer.name for layer in s.layers) == ["2", "4", "6"], s.layers
    assert set(s.kept) == {"0"}
    assert "stem on <= 4 input channels" in s.kept["0"]
    assert isinstance(q[0], torch.nn.Conv2d) and isinstance(q[2], QConv2d) and isinstance(q[4], QConv2d)
    assert sorted(layer.name for layer in summary(d).layers) == ["2", "4", "6"]
    every = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=data, int8_everywhere=True)
    assert sorted(layer.name for layer in summary(every).layers) == ["0", "2", "4", "6"]
    # 1x1 convs with padding given as a string stay float (int8 convs take explicit zero
    # padding); a depthwise conv is not a stem (it stays float as a grouped conv, with the warning)
    odd = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 1, padding="same"), torch.nn.Conv2d(8, 8, 1, padding="valid"),
                              torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)).eval()
    with pytest.warns(UserWarning, match="2 \\(a grouped conv"):
        o = zenith.quantize(copy.deepcopy(odd), "int8-static", calibration=batches(1, shape=(1, 8, 56, 56)))
    assert sorted(summary(o).kept) == ["0", "1", "2"]
    assert "explicit zero padding" in summary(o).kept["0"]
    assert "beside a depthwise conv" in summary(o).kept["1"]  # (its padding string would keep it too)
    x = batches(1, seed=3, shape=(1, 3, 56, 56))[0]
    with torch.no_grad():
        ref = m(x)
        for model in (q, every):
            cos = F.cosine_similarity(compiled_vs_eager(model, x).flatten(), ref.flatten(), dim=0).item()
            assert cos > 0.99, cos


def test_large_stem_quantized_with_vnni_runs_blocked():
    # a ResNet stem (3 -> 64, 7x7 / 2: 9408 products a pixel) is quantized on AVX-512 VNNI
    # and kept fp32 elsewhere; quantized, it reads the NCHW image and writes what the max
    # pool and the convs after it read (conv2d_nchwc with `block`: the compiled graph
    # converts nothing to the blocked layout; int8, its ReLU'd output passes as codes,
    # pooled by max_pool2d_codes), against eager within int8's
    # error, a NaN in the image reaching only the outputs it should (there, where every
    # conv is int8)
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1), torch.nn.Conv2d(64, 64, 1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU()).eval()
    q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=batches(2, shape=(2, 3, 64, 64)))
    vnni = _C.qmatmul_isa() == "avx512vnni"
    assert isinstance(q[0], QConv2d) == vnni
    assert ("0" in summary(q).kept) != vnni
    x = batches(1, seed=4, shape=(2, 3, 64, 64))[0]
    with torch.no_grad():
        ref = m(x)
    want = compiled_vs_eager(q, x)  # (eager's, once the compiled output matched it)
    cos = F.cosine_similarity(want.flatten(), ref.flatten(), dim=0).item()
    assert cos > 0.99, cos
    ops = zenith.explain(q, x).zenith_ops
    assert ops.get("conv2d_nchwc") == 3 and "conv2d" not in ops and "to_nchwc" not in ops, ops
    # (with the stem in int8, its ReLU'd output passes as codes through the pool: chain_int8)
    assert ("max_pool2d_codes" if vnni else "max_pool2d_nchwc") in ops, ops
    if not vnni:  # (the float32 3x3 conv then runs by Winograd, whose tiles spread a NaN past its windows)
        return
    x[1, 2, 10, 10] = float("nan")  # image 1: a NaN, read by a few stem windows
    with torch.no_grad():
        want, got = q(x), torch.compile(q, backend="zenith")(x)
    assert torch.equal(got.isnan(), want.isnan())
    assert not got[0].isnan().any() and got[1].isnan().any()
    ok = ~want.isnan()
    assert_same_model_close(got[ok], want[ok])


def test_quantize_keeps_1x1_convs_beside_depthwise_ones():
    # an inverted-residual block: the expand and project 1x1 convs beside the depthwise conv
    # (through batch-norms and activations) stay fp32, where fp32 fuses the three; a 1x1
    # conv after the block's projection is quantized; int8_everywhere=True quantizes them
    torch.manual_seed(0)
    nn = torch.nn
    m = nn.Sequential(
        nn.Conv2d(16, 64, 1), nn.BatchNorm2d(64), nn.ReLU6(),
        nn.Conv2d(64, 64, 3, padding=1, groups=64), nn.BatchNorm2d(64), nn.ReLU6(),
        nn.Conv2d(64, 16, 1), nn.BatchNorm2d(16),
        nn.Conv2d(16, 32, 1), nn.ReLU()).eval()
    data = batches(2, shape=(1, 16, 20, 20))
    for scheme, kw in (("int8-static", {"calibration": data}), ("int8-dynamic", {})):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the depthwise conv's warning aside: nothing else
            warnings.filterwarnings("ignore", message=".*grouped conv")
            q = zenith.quantize(copy.deepcopy(m), scheme, **kw)
            every = zenith.quantize(copy.deepcopy(m), scheme, int8_everywhere=True, **kw)
        s = summary(q)
        assert [layer.name for layer in s.layers] == ["8"], s.layers
        assert "beside a depthwise conv" in s.kept["0"] and "beside a depthwise conv" in s.kept["6"]
        assert sorted(layer.name for layer in summary(every).layers) == ["0", "6", "8"]
    x = data[0]
    with torch.no_grad():
        cos = F.cosine_similarity(compiled_vs_eager(q, x).flatten(), m(x).flatten(), dim=0).item()
    assert cos > 0.99, cos


def compiled_vs_eager(model, *inputs):
    compiled = torch.compile(model, backend="zenith")
    with torch.no_grad():
        want = model(*inputs)
        got = compiled(*inputs)
    assert_same_model_close(got, want)
    return want


def test_quantize_static_takes_tuples_and_dicts_and_generators():
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(32, 32), torch.nn.Linear(32, 8)

        def forward(self, x, scale=1.0):
            return self.b(torch.relu(self.a(x)) * scale)

    torch.manual_seed(0)
    m = Two().eval()
    data = [torch.randn(4, 32) for _ in range(3)]
    for calib in ([(x,) for x in data], [{"x": x, "scale": 2.0} for x in data], (x for x in data)):
        q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=calib)
        assert isinstance(q.a, QLinear) and q.a.x_scale > 0 and q.b.x_scale > 0
    q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=data)
    compiled_vs_eager(q, data[0])


def test_error_budget_keeps_the_sensitive_layers():
    m = small_cnn()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=batches(4))
    errs = {layer.name: layer.error for layer in summary(full).layers}
    x = batches(4)
    with torch.no_grad():
        e_full = max(cal.relative_error(m(b), full(b)) for b in x)
    budget = e_full * 0.9  # under the whole model's: some layers must stay float
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=x, max_error=budget)
    s = summary(q)
    kept = [n for n, why in s.kept.items() if why.startswith("sensitive")]
    quantized = [layer.name for layer in s.layers]
    assert kept and quantized, (kept, quantized)
    # most tolerant first: every layer kept is at least as sensitive as every one quantized
    assert min(errs[n] for n in kept) >= max(errs[n] for n in quantized)
    with torch.no_grad():
        assert max(cal.relative_error(m(b), q(b)) for b in x) <= budget


def test_conv_weight_bits():
    # 7-bit filters (codes within +-63, as ONNX Runtime's reduce_range) by default where the
    # int8 kernels are AVX2's, 8-bit elsewhere; the model stays as close to fp32.
    m = small_cnn()
    x = batches(1, seed=9)[0]
    with torch.no_grad():
        ref = m(x)
    widest = {}
    for bits in (7, 8, None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the grouped conv that stays float
            q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=batches(4), conv_weight_bits=bits)
        convs = [mod for mod in q.modules() if isinstance(mod, QConv2d)]
        assert len(convs) == 3
        widest[bits] = max(int(c.weight[:, 4:].view(torch.int8).abs().max()) for c in convs)
        cos = F.cosine_similarity(compiled_vs_eager(q, x).flatten(), ref.flatten(), dim=0).item()
        assert cos > 0.99, (bits, cos)
        # the summary and zenith.explain say which
        assert {layer.weight_bits for layer in summary(q).layers if layer.kind == "conv2d"} == \
            {7 if widest[bits] == 63 else 8}
        assert ("int8 (7-bit codes)" in str(zenith.explain(q, x))) == (widest[bits] == 63)
    assert widest[7] == 63 and widest[8] == 127
    assert widest[None] == (63 if _C.qmatmul_isa() == "avx2" else 127)  # (default_conv_weight_bits)
    for bad in (6, 16, "7", 7.0):
        with pytest.raises(ValueError, match="conv_weight_bits is 7 or 8"):
            zenith.quantize(copy.deepcopy(m), "int8-dynamic", conv_weight_bits=bad)
    with pytest.raises(ValueError, match="conv_weight_bits is for the schemes that quantize convs"):
        zenith.quantize(copy.deepcopy(m), "int8", conv_weight_bits=7)
    w = torch.randn(4, 64)
    for bad in (0, 128, True, 63.0):
        with pytest.raises(ValueError, match="int8_max is the largest int8 code"):
            quantize_weight(w, "int8", bad)
    with pytest.raises(ValueError, match="for the int8 format only"):
        quantize_weight(w, "q8_0", 63)
    q7 = quantize_weight(w, "int8", 63)
    torch.testing.assert_close(dequantize(q7, "int8"), w, rtol=0, atol=float(w.abs().max()) / 63 / 2 * 1.0001)


@pytest.mark.parametrize("scheme", ["int8", "int8-dynamic"])
def test_linear_weight_bits(scheme):
    # linear_weight_bits=7: int8 weights of codes within +-63 (AVX2's int8 GEMM on dynamic
    # activations, 8+ rows, then takes its w7 tiles); compiled against eager, and near fp32.
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(96, 160), torch.nn.GELU(), torch.nn.Linear(160, 64)).eval()
    x = torch.randn(37, 96)
    with torch.no_grad():
        ref = m(x)
    for bits, top in ((7, 63), (8, 127)):
        q = zenith.quantize(copy.deepcopy(m), scheme, linear_weight_bits=bits)
        lins = [mod for mod in q.modules() if isinstance(mod, QLinear)]
        assert len(lins) == 2
        assert max(int(lin.weight[:, 4:].view(torch.int8).abs().max()) for lin in lins) == top
        got = compiled_vs_eager(q, x)
        cos = F.cosine_similarity(got.flatten(), ref.flatten(), dim=0).item()
        assert cos > 0.995, (bits, cos)
    for bad in (6, 16, None, 7.0):
        with pytest.raises(ValueError, match="linear_weight_bits is 7 or 8"):
            zenith.quantize(copy.deepcopy(m), scheme, linear_weight_bits=bad)
    with pytest.raises(ValueError, match="linear_weight_bits=7 is for int8 weights, not q4_0"):
        zenith.quantize(copy.deepcopy(m), "int4", linear_weight_bits=7)


def test_static_options_are_checked():
    m = small_cnn()
    with pytest.raises(ValueError, match="needs calibration="):
        zenith.quantize(m, "int8-static")
    with pytest.raises(ValueError, match="unknown calibration method 'mse'"):
        zenith.quantize(m, "int8-static", calibration=batches(1), method="mse")
    with pytest.raises(ValueError, match="percentile must be in \\(0, 100\\]"):
        zenith.quantize(m, "int8-static", calibration=batches(1), percentile=0)
    with pytest.raises(ValueError, match="calibration is for scheme='int8-static'"):
        zenith.quantize(m, "int8-dynamic", calibration=batches(1))
    with pytest.raises(ValueError, match="gave no batches"):
        zenith.quantize(m, "int8-static", calibration=[])
    with pytest.raises(ValueError, match="int8-static has one weight scale per output channel"):
        zenith.quantize(m, "int8-static", calibration=batches(1), group_size=32)
    for alpha in (1.5, -0.1, True, "0.5"):
        with pytest.raises(ValueError, match="smooth is SmoothQuant's migration strength"):
            zenith.quantize(m, "int8-static", calibration=batches(1), smooth=alpha)
    with pytest.raises(ValueError, match="smooth is for scheme='int8-static'"):
        zenith.quantize(m, "int8", smooth=0.5)


def _outlier_inputs(n, k=48, seed=0):
    """Activations with a few channels ~60x the rest, as transformers' hidden states have."""
    g = torch.Generator().manual_seed(seed)
    big = torch.ones(k)
    big[[3, 17, 40]] = 60.0
    return [torch.randn(6, k, generator=g) * big for _ in range(n)]


def test_observer_channel_maxima_leave_out_nan_and_inf():
    o = cal.Observer(channels=True)
    x = torch.tensor([[1.0, -2.0, 0.5], [-3.0, 0.25, 0.0]])
    o.add(x)
    assert torch.equal(o.channel_amax, torch.tensor([3.0, 2.0, 0.5]))
    o.add(torch.tensor([[float("nan"), -5.0, float("inf")]]))  # the masked path
    assert torch.equal(o.channel_amax, torch.tensor([3.0, 5.0, 0.5]))
    assert cal.Observer().channel_amax is None


def test_qlinear_smooth_matches_reference():
    torch.manual_seed(0)
    lin = torch.nn.Linear(48, 24)
    s = torch.rand(48) * 4 + 0.25
    q = QLinear.from_float(lin, "int8", x_scale=0.05, smooth=s)
    x = _outlier_inputs(1)[0]
    # the reference: x / s on the static scale, times the quantized w * s
    want = fake_quant_act(x / s, 0.05) @ dequantize(q.weight, "int8").t() + lin.bias.detach()
    with torch.no_grad():
        torch.testing.assert_close(q(x), want, rtol=1e-4, atol=1e-4)
        assert_same_model_close(torch.compile(q, backend="zenith")(x), q(x))
        assert q(x.to(torch.bfloat16)).dtype == torch.bfloat16
    assert "x_smooth" in q.state_dict() and "smoothed" in repr(q)
    with pytest.raises(ValueError, match="x_smooth needs static INT8"):
        QLinear(q.weight, "int8", None, None, torch.ones(48))
    with pytest.raises(ValueError, match="x_smooth must be \\[48\\] positive finite"):
        QLinear(q.weight, "int8", None, 0.05, torch.zeros(48))


def test_qlinear_x_mul_is_multiplying_first_in_one_pass():
    # SmoothQuant's per-channel multiplier goes into the op: eager and compiled equal the
    # op on x * x_smooth bit for bit (6 rows: both run the dot kernels; from 8 rows the
    # compiled call's packed GEMM sums in another order), and the compiled graph holds no
    # mul of its own.
    torch.manual_seed(0)
    lin = torch.nn.Linear(48, 24)
    q = QLinear.from_float(lin, "int8", x_scale=0.05, smooth=torch.rand(48) * 4 + 0.25)
    x = _outlier_inputs(1)[0]
    x[1, 5] = float("nan")
    with torch.no_grad():
        first = torch.ops.zenith.qlinear(x * q.x_smooth, q.weight, q.bias, "int8", 0.05)
        eager = q(x)
        compiled = torch.compile(q, backend="zenith")(x)
    torch.testing.assert_close(eager, first, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(compiled, first, rtol=0, atol=0, equal_nan=True)
    ops = zenith.explain(q, x).zenith_ops
    assert set(ops) == {"qmatmul"}, ops
    w, k = q.weight, 48
    with pytest.raises(ValueError, match="x_mul .* needs static INT8"):
        torch.ops.zenith.qlinear(x, w, None, "int8", None, False, torch.ones(k))
    with pytest.raises(ValueError, match="x_mul must be float32 \\[48\\]"):
        torch.ops.zenith.qlinear(x, w, None, "int8", 0.05, False, torch.ones(k - 1))
    with pytest.raises(ValueError, match="x_mul must be float32"):
        torch.ops.zenith.qlinear(x, w, None, "int8", 0.05, False, torch.ones(k, dtype=torch.float64))
    # 24 rows: the packed int8 GEMM compiled, against eager within float order
    x24 = torch.randn(24, 48) * 3
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(q, backend="zenith")(x24),
                                   torch.ops.zenith.qlinear(x24 * q.x_smooth, q.weight, q.bias, "int8", 0.05),
                                   rtol=1e-5, atol=1e-5)
    # a model cast to bf16 casts x_smooth too: still float32 for the op, and native compiled
    qb = copy.deepcopy(q).to(torch.bfloat16)
    assert qb.x_smooth.dtype == torch.bfloat16
    xb = x.to(torch.bfloat16)
    with torch.no_grad():  # its values as the cast left them, multiplied in float32
        want = torch.ops.zenith.qlinear(xb.float() * qb.x_smooth.float(), qb.weight, qb.bias, "int8", 0.05)
        torch.testing.assert_close(qb(xb), want.to(torch.bfloat16), rtol=0, atol=0, equal_nan=True)
    qb.bias = None  # (a bf16 bias is not one qmatmul takes; without one the layer is native)
    r = zenith.explain(qb, xb)
    assert "qmatmul" in r.zenith_ops and set(r.zenith_ops) <= {"qmatmul", "cast"} and not r.fallback_ops, r
    # the gradient passes the quantization through, scaled by x_mul per channel
    xg = torch.randn(3, k, requires_grad=True)
    torch.ops.zenith.qlinear(xg, w, None, "int8", 0.05, False, q.x_smooth).sum().backward()
    want = (torch.ones(3, 24) @ dequantize(w, "int8")) * q.x_smooth
    torch.testing.assert_close(xg.grad, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", ["minmax", "percentile"])
def test_smooth_cuts_the_error_of_outlier_channels(method):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(48, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).eval()
    data = _outlier_inputs(8)
    test = data[:4]  # in the calibrated range: what is measured is rounding, not clipping
    plain = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=data, method=method)
    smooth = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=(x for x in data), method=method,
                             smooth=0.85)  # a generator: read twice (percentile) from one list
    assert [layer.smoothed for layer in summary(smooth).layers] == [True, True]
    assert not any(layer.smoothed for layer in summary(plain).layers)
    with torch.no_grad():
        e_plain = max(cal.relative_error(m(x), plain(x)) for x in test)
        e_smooth = max(cal.relative_error(m(x), smooth(x)) for x in test)
    assert e_smooth < 0.6 * e_plain, (e_smooth, e_plain)
    # the layer with the outlier channels on its input gains most
    assert summary(smooth).layers[0].error < 0.5 * summary(plain).layers[0].error
    compiled_vs_eager(smooth, test[0])


@pytest.mark.parametrize("method", ["minmax", "percentile"])
def test_smoothed_siblings_share_one_divisor_and_one_gemm(tmp_path, method):
    # Three linears reading one x (a transformer's Q, K and V) get one SmoothQuant divisor,
    # from their weights' columns together, as one tensor: the compiled graph reads it as
    # one value and runs the three as one qmatmul with parts (one GEMM, x quantized once);
    # a linear reading another x keeps its own. Against eager, and saved and loaded.
    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = torch.nn.Linear(48, 32), torch.nn.Linear(48, 32), torch.nn.Linear(48, 64)
            self.o = torch.nn.Linear(128, 48)

        def forward(self, x):
            return self.o(torch.cat([self.q(x), self.k(x), self.v(x)], -1))

    torch.manual_seed(0)
    m = Attn().eval()
    m.k.weight.data[:, 5] *= 20  # one weight's outlier column: the shared divisor takes the largest of the three
    data = _outlier_inputs(6)
    q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=data, smooth=0.5, method=method)
    assert q.q.x_smooth is q.k.x_smooth is q.v.x_smooth and q.o.x_smooth is not q.q.x_smooth
    assert q.q.x_scale == q.k.x_scale == q.v.x_scale
    # s = max|x|^0.5 / max|w|^0.5 over the three weights' columns: x_smooth = 1 / s
    x_amax = torch.stack([x.abs().reshape(-1, 48).amax(0) for x in data]).amax(0)
    w_amax = torch.cat([m.q.weight, m.k.weight, m.v.weight]).abs().amax(0)
    want = 1 / (x_amax.clamp(min=1e-5) ** 0.5 / w_amax.clamp(min=1e-5) ** 0.5).clamp(min=1e-5)
    torch.testing.assert_close(q.q.x_smooth, want, rtol=1e-5, atol=0)
    x = data[0]
    compiled_vs_eager(q, x)
    compiled_vs_eager(q, torch.cat(data[:4]))  # 24 rows: the fused parts run one packed int8 GEMM
    ops = zenith.explain(q, x).zenith_ops
    assert ops.get("qmatmul") == 2, ops  # q, k and v as one; o
    with torch.no_grad():
        assert cal.relative_error(m(x), q(x)) < 0.05
    path = tmp_path / "attn.safetensors"
    zenith.save_quantized(q, path)
    fresh = zenith.load_quantized(Attn().eval(), path)
    assert fresh.q.x_smooth is fresh.k.x_smooth is fresh.v.x_smooth  # still one tensor: still one GEMM
    assert zenith.explain(fresh, x).zenith_ops.get("qmatmul") == 2
    with torch.no_grad():
        assert torch.equal(fresh(x), q(x))


def test_tensor_labels_tell_objects_apart_without_keeping_them():
    # one object, one label; a tensor reusing a freed one's id (CPython reuses the address
    # of a freed object at once) and every later one get labels of their own
    labels = cal.TensorLabels()
    a = torch.ones(3)
    first = labels(a)
    assert labels(a) == first
    gone = id(a)
    del a
    reused = None
    for _ in range(100):
        b = torch.zeros(2)
        if id(b) == gone:
            reused = b
            break
    seen = {first}
    if reused is not None:  # (where the address came back: the case the weak reference is for)
        assert labels(reused) not in seen
        seen.add(labels(reused))
    for _ in range(5):
        t = torch.zeros(1)
        assert labels(t) not in seen
        seen.add(labels(t))
        del t
    assert len(seen) == (7 if reused is not None else 6)


def test_layers_the_calibration_never_reaches_stay_float():
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

        def forward(self, x):
            return self.used(x)

    with pytest.warns(UserWarning, match="unused \\(the calibration data never reached it"):
        q = zenith.quantize(Branchy(), "int8-static", calibration=[torch.randn(2, 16)])
    assert isinstance(q.used, QLinear) and isinstance(q.unused, torch.nn.Linear)


def test_eager_quantized_ops_run_on_torchs_thread_count():
    torch.set_num_threads(2)
    _C.set_num_threads(1)
    w = quantize_weight(torch.randn(16, 64), "int8")
    torch.ops.zenith.qlinear(torch.randn(3, 64), w, None, "int8")
    assert _C.num_threads() == 2
    _C.set_num_threads(1)
    cal.Observer().add(torch.randn(10))
    assert _C.num_threads() == 2


def test_int8_codes_between_convs(monkeypatch):
    """chain_int8: a torchvision ResNet-18 quantized int8-static (every conv), frozen with
    float32 between its int8 convs (ZENITH_INT8_CHAIN=0), with codes between them but
    residuals kept float (=exact: the same output bit for bit), and by default (residuals
    as codes too: within the residuals' rounding, cosine > 0.999); the pass reporting its
    rewrites, no fallback."""
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(1, 3, 224, 224)  # (at 64 x 64, layout_nchwc leaves ResNet-18's small maps NCHW)
    q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=[(torch.randn(1, 3, 224, 224),)],
                        int8_everywhere=True)
    out, rep = {}, {}
    with torch.no_grad():
        for mode in ("0", "exact", None):
            if mode:
                monkeypatch.setenv("ZENITH_INT8_CHAIN", mode)
            else:
                monkeypatch.delenv("ZENITH_INT8_CHAIN", raising=False)
            out[mode] = zenith.freeze(q)(x)
            rep[mode] = zenith.explain(q, x, dynamic=False)
    assert torch.equal(out["exact"], out["0"])
    assert rep["0"].passes["chain_int8"] == 0
    assert rep["exact"].passes["chain_int8"] >= 8, rep["exact"].passes  # each block's first conv into its second
    assert rep[None].passes["chain_int8"] >= rep["exact"].passes["chain_int8"]
    assert rep[None].fallback_ops == {}
    assert not torch.equal(out[None], out["0"])  # the residuals' codes were read
    assert F.cosine_similarity(out[None].flatten(), out["0"].flatten(), dim=0).item() > 0.999
    ref = m(x)
    for o in out.values():
        assert F.cosine_similarity(o.flatten(), ref.flatten(), dim=0).item() > 0.95
