"""The public API, the backend registration, and behaviour on bad or unusual input."""
import copy
import gc
import logging
import subprocess
import sys
import threading

import pytest
import torch

import zenith
from zenith import _C


def test_backend_by_name_without_import():
    # A fresh interpreter: the entry point alone makes backend="zenith" work.
    code = (
        "import torch\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2, backend='zenith')\n"
        "x = torch.randn(5)\n"
        "assert torch.equal(f(x), torch.relu(x) * 2)\n"
        "import zenith\n"
        "assert zenith.stats()['segments_run'] == 1, zenith.stats()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_does_not_touch_torch_settings():
    code = (
        "import torch, torch._dynamo\n"
        "before = (torch.get_num_threads(), torch.get_default_dtype(), torch.is_grad_enabled(),\n"
        "          dict(torch._dynamo.config.get_config_copy()))\n"
        "import zenith\n"
        "after = (torch.get_num_threads(), torch.get_default_dtype(), torch.is_grad_enabled(),\n"
        "         dict(torch._dynamo.config.get_config_copy()))\n"
        "assert before == after\n"
        "assert 'zenith' in torch._dynamo.list_backends()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_compile_explain_stats():
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    before = zenith.stats()
    c = zenith.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))
    after = zenith.stats()
    assert after["graphs_compiled"] == before["graphs_compiled"] + 1
    assert after["calls"] == before["calls"] + 1
    assert after["nodes_native"] > before["nodes_native"]
    r = zenith.explain(m, x)
    assert r.nodes_total == r.nodes_native > 0
    assert r.fallback_ops == {}
    assert set(r.passes) == {"canonicalize", "constant_folding", "cse", "fuse_conv_bn", "fuse_attention_layout",
                             "fuse_conv_residual", "fuse_epilogue", "fuse_conv_pw_dw", "fuse_residual_norm",
                             "fuse_elementwise", "layout_nchwc", "chain_int8", "fuse_qmatmul_siblings",
                             "fuse_addmm_siblings", "gemm_handoff_transposed", "dce"}
    assert r.compile_seconds > 0
    text = str(r)
    assert "run natively" in text and "fallbacks to PyTorch: none" in text


def test_fallback_is_visible_and_correct(caplog):
    def f(x):
        y = torch.sin(x) * 2
        z = torch.special.i0(y)  # no Zenith kernel: runs in PyTorch
        return torch.relu(z) + y

    x = torch.randn(4, 5)
    with caplog.at_level(logging.INFO, logger="zenith"):
        r = zenith.explain(f, x)
    assert "aten.special_i0.default" in r.fallback_ops or any("i0" in k for k in r.fallback_ops)
    assert r.nodes_native == r.nodes_total - 1
    assert any("runs in PyTorch" in m and "i0" in m for m in caplog.messages)
    c = zenith.compile(f)
    torch.testing.assert_close(c(x), f(x))


def test_symbolic_op_arguments_fall_back_visibly():
    # Under dynamic shapes an int-list argument can be a size expression: a pad to a
    # multiple of 8, a pooling window the size of the map. The compile used to fail with
    # a TypeError; such a node now runs in PyTorch and the rest stays native.
    import torch.nn.functional as F

    pad = lambda x: F.pad(x * 2, (0, (8 - x.shape[-1] % 8) % 8)) + 1  # noqa: E731
    pool = lambda x: F.avg_pool2d(x.relu(), x.shape[2:]) * 3  # noqa: E731
    for f, make in ((pool, lambda n: torch.randn(1, 3, n, n + 1)), (pad, lambda n: torch.randn(2, n))):
        torch._dynamo.reset()
        before = zenith.stats()
        c = torch.compile(f, backend="zenith", dynamic=True)
        for n in (5, 7, 12, 3):
            x = make(n)
            torch.testing.assert_close(c(x), f(x))
        after = zenith.stats()
        assert after["graphs_compiled"] > before["graphs_compiled"]
        assert after["nodes_native"] > before["nodes_native"]  # the arithmetic around it
    assert after["nodes_fallback"] > before["nodes_fallback"]  # the pad (the pool's window: guarded static)


def test_a_converter_bug_is_a_visible_fallback(monkeypatch, caplog):
    # A converter raising something other than Unsupported (its own bug) must not fail
    # the user's compile: the node runs in PyTorch with the error as its reason.
    from zenith import importer

    def broken(L, node):
        raise TypeError("a bug")

    monkeypatch.setitem(importer.CONVERTERS, torch.ops.aten.sin.default, broken)
    monkeypatch.delenv("ZENITH_STRICT_IMPORTER", raising=False)  # as users run
    f = lambda x: torch.sin(x * 2) + 1  # noqa: E731
    x = torch.randn(3, 4)
    with caplog.at_level(logging.WARNING, logger="zenith"):
        r = zenith.explain(f, x)
    assert [e["reason"] for e in r.fallback_ops.values()] == ["importer error (TypeError: a bug)"]
    assert r.nodes_native == r.nodes_total - 1
    assert any("converting" in m and "a bug" in m for m in caplog.messages)
    torch.testing.assert_close(zenith.compile(f)(x), f(x))
    monkeypatch.setenv("ZENITH_STRICT_IMPORTER", "1")  # the suite's setting: the bug fails loudly
    with pytest.raises(Exception, match="TypeError: a bug"):  # (Dynamo wraps it)
        zenith.explain(f, x)


def test_unknown_option_is_an_error():
    with pytest.raises(TypeError, match="unknown option"):
        zenith.compile(torch.nn.Linear(2, 2), pases=False)


def test_fallback_false_raises():
    c = zenith.compile(lambda x: torch.special.i0(x) + 1, fallback=False)
    with pytest.raises(Exception, match="fallback=False"):
        c(torch.randn(3))


def test_unsupported_dtype_falls_back():
    f = lambda x: (x * 2 + 1).sum(-1)  # noqa: E731
    c = zenith.compile(f)
    x = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(c(x), f(x))
    r = zenith.explain(f, x)
    assert r.nodes_native == 0 and all("float64" in e["reason"] for e in r.fallback_ops.values())


def test_other_device_falls_back_by_name():
    # No GPU here: the device seam is exercised with PyTorch's meta device.
    from torch.fx.experimental.proxy_tensor import make_fx

    from zenith.partition import CompiledGraph

    x = torch.empty(3, 4, device="meta")
    gm = make_fx(lambda t: torch.relu(t) + 1, tracing_mode="fake")(x)
    cg = CompiledGraph(gm, {})
    assert cg.report.nodes_native == 0
    assert all("device meta" in e["reason"] for e in cg.report.fallback_ops.values())
    out = cg([x])
    assert out.device.type == "meta" and out.shape == (3, 4)


def test_shape_change_recompiles_or_generalises():
    m = torch.nn.Linear(6, 3).eval()
    c = zenith.compile(m)
    with torch.no_grad():
        for n in [2, 5, 1, 7]:
            x = torch.randn(n, 6)
            torch.testing.assert_close(c(x), m(x))


def test_dtype_change_is_guarded():
    f = lambda x: torch.relu(x) * 3  # noqa: E731
    c = zenith.compile(f)
    for dt in [torch.float32, torch.int64, torch.bfloat16, torch.float32]:
        x = (torch.randn(4, 4) * 5).to(dt)
        torch.testing.assert_close(c(x), f(x))


def test_executable_rejects_wrong_inputs_by_name():
    g = _C.Graph()
    a = g.add_input("a", "f32", [2, 3])
    g.set_outputs(g.add_node("relu", [a]))
    exe = _C.Executable(g)
    with pytest.raises(RuntimeError, match=r"input 0 \(a\): dtype i64"):
        exe.run([torch.zeros(2, 3, dtype=torch.int64)])
    with pytest.raises(RuntimeError, match=r"input 0 \(a\): dim 1 is 4"):
        exe.run([torch.zeros(2, 4)])
    with pytest.raises(RuntimeError, match="expected 1 tensor inputs"):
        exe.run([])
    with pytest.raises(RuntimeError, match="not contiguous"):
        exe.run([torch.zeros(3, 2).t()])
    with pytest.raises(RuntimeError, match="unknown op"):
        g.add_node("nope", [a])


def test_out_of_range_index_raises_not_garbage():
    emb = torch.nn.Embedding(10, 4).eval()
    c = zenith.compile(emb)
    with torch.no_grad():
        c(torch.tensor([1, 2]))
        with pytest.raises(Exception, match="out of range"):
            c(torch.tensor([1, 12]))


def test_negative_indices_as_eager_takes_them():
    """x[idx] counts a negative index from the end; index_select and gather refuse one,
    as eager does (Zenith's index_select wrapped it for both until 2026-12-05)."""
    x = torch.randn(4, 5)
    sel = lambda t, i: torch.index_select(t, 0, i)  # noqa: E731
    gat = lambda t, i: torch.gather(t, 1, i)  # noqa: E731
    adv = lambda t, i: t[i]  # noqa: E731
    i = torch.tensor([0, -1])
    torch.testing.assert_close(zenith.compile(adv)(x, i), adv(x, i))
    torch.testing.assert_close(zenith.compile(sel)(x, i.abs()), sel(x, i.abs()))
    for f, idx in ((sel, i), (gat, torch.tensor([[0, -1]] * 4))):
        with pytest.raises(Exception):
            f(x, idx)
        with pytest.raises(Exception, match="index -1 is out of bounds"):
            zenith.compile(f)(x, idx)
    with pytest.raises(Exception, match="index -5 is out of bounds"):
        zenith.compile(adv)(x, torch.tensor([-5]))


def test_nan_inf_propagate():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU(), torch.nn.LayerNorm(4)).eval()
    x = torch.randn(3, 4)
    x[0, 1] = float("nan")
    x[1, 2] = float("inf")
    c = zenith.compile(m)
    with torch.no_grad():
        got, want = c(x), m(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.isnan(got[0]).all() and torch.isnan(got[1]).all() and torch.isfinite(got[2]).all()
    f = lambda t: torch.softmax(t, -1), torch.maximum  # noqa: E731
    y = torch.tensor([[1.0, float("nan")], [float("-inf"), 0.0]])
    torch.testing.assert_close(zenith.compile(f[0])(y), f[0](y), equal_nan=True)


def test_nan_inf_stay_in_their_windows_through_winograd_convs():
    """3x3 convs on 64 channels run by Winograd (blocked in a chain, NCHW alone); a NaN or
    an infinity must reach the outputs eager's direct conv gives it, no more, and an
    infinity must not turn into NaN (Winograd's transforms would spread both over a tile)."""
    torch.manual_seed(0)
    chain = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
                                torch.nn.Conv2d(64, 64, 3, padding=1)).eval()
    lone = torch.nn.Conv2d(64, 64, 3, padding=1).eval()
    for m, ops in ((chain, "conv2d_nchwc"), (lone, "conv2d")):
        assert ops in zenith.explain(m, torch.randn(3, 64, 16, 16)).zenith_ops
        f = zenith.freeze(m)
        for val in ("nan", "inf", "-inf"):
            x = torch.randn(3, 64, 16, 16)
            x[0, 5, 3, 9] = float(val)
            x[2, 60, 15, 0] = float(val)  # image 1 stays clean
            with torch.no_grad():
                want, got = m(x), f(x)
            torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-4, atol=1e-4)
            assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
            assert (~want.isfinite()).sum() > 0 and want[1].isfinite().all()


def test_pow_special_cases_only_a_python_scalar_exponent():
    """Eager computes x ** 0.5 (a Python scalar) as sqrt, so -0 -> -0 and -inf -> NaN, but
    pow with a tensor exponent, one element or many, as pow: -0 -> +0 and -inf -> +inf."""
    x = torch.tensor([-0.0, float("-inf"), 4.0, 2.0] * 4)
    fns = {"scalar": lambda t: t ** 0.5, "0-d": lambda t: torch.pow(t, torch.tensor(0.5)),
           "tensor": lambda t: torch.pow(t, torch.full_like(t, 0.5)), "scalar base": lambda t: torch.pow(2.0, t * 0 + 0.5)}
    for name, f in fns.items():
        want, got = f(x), zenith.compile(f)(x)
        torch.testing.assert_close(got, want, equal_nan=True, msg=name)
        num = ~want.isnan()  # (a NaN's sign bit means nothing)
        assert torch.equal(torch.signbit(got[num]), torch.signbit(want[num])), name


def test_integer_division_of_the_lowest_by_minus_one_and_by_zero():
    """x86's idiv traps on INT64_MIN / -1 (eager's trunc division dies of SIGFPE): Zenith
    gives the wrapped quotient (eager's floor division's answer) and remainder 0; a zero
    divisor is a clear error, as in eager."""
    a = torch.tensor([-2**63, 7, -7, 5] * 4)
    b = torch.tensor([-1, -1, 2, -2] * 4)
    floor = lambda x, y: torch.div(x, y, rounding_mode="floor")  # noqa: E731
    trunc = lambda x, y: torch.div(x, y, rounding_mode="trunc")  # noqa: E731
    assert torch.equal(zenith.compile(floor)(a, b), floor(a, b))
    assert zenith.compile(trunc)(a, b)[:4].tolist() == [-2**63, -7, -3, -2]
    assert torch.equal(zenith.compile(torch.remainder)(a, b), torch.remainder(a, b))
    z = b.clone()
    z[2] = 0
    for f in (floor, trunc, torch.remainder):
        with pytest.raises(Exception, match="(?i)division by zero"):
            zenith.compile(f)(a, z)


def test_empty_tensors():
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    c = zenith.compile(m)
    with torch.no_grad():
        out = c(torch.randn(0, 4))
    assert out.shape == (0, 2)
    f = lambda t: t.sum(0) + 1  # noqa: E731
    torch.testing.assert_close(zenith.compile(f)(torch.randn(0, 3)), f(torch.randn(0, 3)))


def test_two_threads_200_calls_each():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                  vocab_size=500)
    m = transformers.BertModel(cfg).eval()
    c = torch.compile(m, backend="zenith")
    inputs = [torch.randint(0, 500, (1, 16)), torch.randint(0, 500, (1, 16))]
    with torch.no_grad():
        want = [m(i).last_hidden_state for i in inputs]
        c(inputs[0])  # compile once up front
    errors = []

    def worker(k):
        try:
            with torch.no_grad():
                for it in range(200):
                    j = (k + it) % 2
                    got = c(inputs[j]).last_hidden_state
                    if not torch.allclose(got, want[j], rtol=1e-4, atol=1e-5):
                        errors.append((k, it))
        except Exception as e:  # pragma: no cover - surfaced below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


def test_bert_dynamic_compiles_once():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig()  # bert-base
    m = transformers.BertModel(cfg).eval()
    c = torch.compile(m, backend="zenith", dynamic=True)
    before = zenith.stats()
    with torch.no_grad():
        for L in [8, 13, 32, 77, 128]:
            ids = torch.randint(0, cfg.vocab_size, (1, L))
            torch.testing.assert_close(c(ids).last_hidden_state, m(ids).last_hidden_state, rtol=1e-4, atol=1e-5)
    after = zenith.stats()
    assert after["graphs_compiled"] - before["graphs_compiled"] == 1
    assert after["nodes_fallback"] == before["nodes_fallback"]


def test_ir_text_roundtrip_from_python():
    g = _C.Graph()
    x = g.add_input("x", "f32", ["s0", 4])
    y = g.add_node("reshape", [x], {"shape": ["s0*4"]})[0]
    g.set_outputs([y])
    text = str(g)
    assert "reshape" in text and str(_C.Graph.parse(text)) == text


def test_training_step_gradients_match_eager():
    torch.manual_seed(0)
    make = lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),  # noqa: E731
                                       torch.nn.Linear(16, 3))
    ref, mod = make(), make()
    mod.load_state_dict(ref.state_dict())
    x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    c = zenith.compile(mod)
    before = zenith.stats()
    torch.nn.functional.cross_entropy(ref(x), y).backward()
    loss = torch.nn.functional.cross_entropy(c(x), y)
    loss.backward()
    after = zenith.stats()
    assert after["graphs_compiled"] - before["graphs_compiled"] == 2  # forward and backward graphs
    assert after["nodes_native"] > before["nodes_native"]
    for p_ref, p in zip(ref.parameters(), mod.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad, rtol=1e-4, atol=1e-6)


def test_transposed_inputs_are_read_in_place():
    # A transposed (non-contiguous) input is passed to the runtime as its contiguous
    # storage plus a permute in the graph, which folds into the GEMM (trans_b): no copy.
    from zenith import backend

    w = torch.randn(6, 5)
    x = torch.randn(3, 5)
    f = lambda a, b: torch.relu(a @ b)  # noqa: E731
    with backend.collect_reports() as sink:
        got = zenith.compile(f)(x, w.t())
    torch.testing.assert_close(got, f(x, w.t()))
    assert sink and sink[0].nodes_total == sink[0].nodes_native
    assert sink[0].zenith_ops.get("permute", 0) == 0  # folded into trans_b, no transpose copy
    # 3-D permuted layouts and transposed views with size-1 dims agree with eager too
    y = torch.randn(4, 2, 3).permute(2, 0, 1)
    g = lambda a: a * 2 + 1  # noqa: E731
    torch.testing.assert_close(zenith.compile(g)(y), g(y))
    z = torch.randn(1, 5, 7).transpose(1, 2)
    torch.testing.assert_close(zenith.compile(g)(z), g(z))


def test_outputs_keep_eager_strides():
    # The runtime writes contiguous outputs; where eager's are not (a channels_last conv,
    # a permuted result) the call gives the output eager's strides, so code that reads
    # them (out.permute(0, 2, 3, 1).view(...), a memory-format check) works as eagerly.
    from zenith import backend

    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(2, 3, 6, 5).to(memory_format=torch.channels_last)
    f = lambda a: (conv(a) * 2, (a + 1).permute(0, 2, 3, 1) * 3)  # noqa: E731
    with torch.no_grad(), backend.collect_reports() as sink:
        want, got = f(x), zenith.compile(f)(x)
    assert sink and sink[0].nodes_total == sink[0].nodes_native
    for a, b in zip(want, got):
        torch.testing.assert_close(b, a)
        assert b.stride() == a.stride()
    assert got[0].is_contiguous(memory_format=torch.channels_last)
    assert got[0].permute(0, 2, 3, 1).view(2, -1).shape == (2, 240)  # eager's view works on ours
    # one tensor returned twice stays one object
    g = lambda a: (lambda y: (y, y))(a.sin())  # noqa: E731
    r = zenith.compile(g)(x)
    assert r[0] is r[1] and r[0].stride() == x.sin().stride()
    # a fallback reading a segment's output sees eager's strides: as_strided reads the
    # storage in channels_last order (it gave other values from a contiguous output)
    h = lambda a: conv(a).as_strided((a.shape[0], 30, 8), (240, 8, 1)) * 2  # noqa: E731
    torch._dynamo.reset()
    ch, ck = torch.compile(h, backend="zenith"), torch.compile(lambda a: conv(a) * 2, backend="zenith")
    with torch.no_grad():  # batch 3 and 4: a symbolic batch, eager's layout kept by its order of dims
        for n in (2, 3, 4):
            xn = torch.randn(n, 3, 6, 5).to(memory_format=torch.channels_last)
            torch.testing.assert_close(ch(xn), h(xn))
            assert ck(xn).stride() == (conv(xn) * 2).stride()
    # as_strided over views of a segment output (a slice, a split, a transpose): they are
    # windows on their base, so they run in PyTorch on it, as eagerly
    y = torch.randn(4, 6)
    for g in (lambda a: (a * 2)[:, :3].as_strided((4, 3), (3, 1)) + 1,
              lambda a: (a * 2).split(2, dim=1)[1].as_strided((2, 5), (5, 1), 3) * 3,
              lambda a: (a.exp() + 1).t()[1:].as_strided((3, 3), (1, 6)) - 1):
        torch._dynamo.reset()
        torch.testing.assert_close(zenith.compile(g)(y), g(y))


def test_outputs_that_are_views_of_outputs_stay_views():
    # Eager returns y[:, 1] or y.t() beside y as windows on y's storage: an in-place change
    # to one shows in the other. Zenith makes those outputs as PyTorch views of its output
    # (chains of views too, a base with eager's channels_last strides, symbolic sizes).
    def f(a):
        y = a * 2
        return y, y[:, 1], y.t(), y.t()[1:], y[1:, :2].unsqueeze(0), (y + 1).sum(1), y.as_strided((y.numel(),), (1,))
    conv = torch.nn.Conv2d(3, 4, 1).eval()
    def g(a):
        y = torch.relu(conv(a))
        return y, y[:, :2], y.permute(0, 2, 3, 1)
    cases = [(f, [torch.randn(3, 4)]),
             (g, [torch.randn(2, 3, 5, 4).to(memory_format=torch.channels_last)]),
             (f, [torch.randn(n, 4) for n in (3, 5, 6)])]  # 5 and 6: a symbolic first dim
    for fn, inputs in cases:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="zenith")
        for x in inputs:
            with torch.no_grad():
                want, got = fn(x), compiled(x)
            for a, b in zip(want, got):
                torch.testing.assert_close(b, a)
                assert b.stride() == a.stride()
            got[0].mul_(-1)  # the views see it, as eager's do
            want[0].mul_(-1)
            for a, b in zip(want, got):
                torch.testing.assert_close(b, a)
    # a clone (or y * 1) is a tensor of its own, a detach shares y's memory, as eagerly
    def k(a):
        y = a.exp()
        return y, y.clone(), y.detach(), y * 1
    torch._dynamo.reset()
    with torch.no_grad():
        want, got = k(torch.ones(3)), torch.compile(k, backend="zenith")(torch.ones(3))
    want[0].add_(100)
    got[0].add_(100)
    for a, b in zip(want, got):
        torch.testing.assert_close(b, a)
    # a view sized by a symbolic expression stays the segment's (a tensor of its own, eager's values)
    h = lambda a: (lambda y: (y, y[:, : a.shape[1] - 1]))(a * 2)  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(h, backend="zenith", dynamic=True)
    for n in (4, 6):
        x = torch.randn(3, n)
        for a, b in zip(h(x), compiled(x)):
            torch.testing.assert_close(b, a)


def test_training_output_does_not_share_a_saved_activation():
    # The forward returns relu (saved for backward) beside the user's output, a view, clone
    # or relu * 1 of it, which the runtime had put in relu's one buffer: changing the output
    # in place rewrote what backward reads (zero gradients; eager raises for the view and
    # accepts the others). Each output now has a buffer of its own.
    for op in (lambda t: t.view(-1), lambda t: t.clone(), lambda t: t * 1):
        torch.manual_seed(0)
        lin = torch.nn.Linear(4, 4)
        fn = lambda a: op(torch.relu(lin(a)))  # noqa: E731
        x = torch.randn(3, 4)
        fn(x).sum().backward()
        want_grad, lin.weight.grad = lin.weight.grad.clone(), None
        torch._dynamo.reset()
        z = torch.compile(fn, backend="zenith")(x)
        z.sub_(10)
        z.sum().backward()
        torch.testing.assert_close(lin.weight.grad, want_grad)


def test_saved_weight_transposes_stay_views_in_training():
    # AOTAutograd's forward returns t(weight) for the backward; Zenith hands back
    # PyTorch's view instead of writing a transposed copy, and gradients still match.
    from zenith import backend

    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    mod = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    mod.load_state_dict(ref.state_dict())
    x = torch.randn(5, 32)
    with backend.collect_reports() as sink:
        zenith.compile(mod)(x).square().sum().backward()
    ref(x).square().sum().backward()
    for p_ref, p in zip(ref.parameters(), mod.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad, rtol=1e-4, atol=1e-5)
    assert len(sink) == 2 and all(r.nodes_total == r.nodes_native for r in sink)
    fw, bw = sink
    assert fw.zenith_ops.get("permute", 0) == 0  # the saved t(weight) is PyTorch's view, not a copy
    # (the backward still transposes grad_output for grad_weight = grad^T x: activation-sized)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 40)).eval()


class _RowMajorMLP(torch.nn.Module):
    """x @ W + b with W stored [in, out] (GPT-2's Conv1D layout): the GEMM packs W."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w1, self.b1 = torch.nn.Parameter(torch.randn(64, 96) * 0.1), torch.nn.Parameter(torch.randn(96))
        self.w2, self.b2 = torch.nn.Parameter(torch.randn(96, 40) * 0.1), torch.nn.Parameter(torch.randn(40))

    def forward(self, x):
        return torch.addmm(self.b2, torch.nn.functional.gelu(torch.addmm(self.b1, x, self.w1)), self.w2)


def test_inference_weights_stay_packed_and_follow_in_place_updates():
    # 40 rows: enough for the blocked GEMM, which reads row-major weights packed once.
    m, x = _RowMajorMLP().eval(), torch.randn(40, 64)
    with zenith.backend.collect_reports() as reports, torch.no_grad():
        c = zenith.compile(m)
        torch.testing.assert_close(c(x), m(x))
        packed = sum(r.packed_weight_bytes for r in reports)
        assert packed == (64 * 96 + 96 * 40) * 4
        m.w1.mul_(-2.0)  # bumps the version counter: the packed copy is dropped
        torch.testing.assert_close(c(x), m(x))
        m.load_state_dict(_RowMajorMLP().state_dict())  # copies in place, as checkpoints load
        m.b2.add_(1.0)
        torch.testing.assert_close(c(x), m(x))
        assert sum(r.packed_weight_bytes for r in reports) == packed
    assert "packed weights" in str(zenith.explain(m, x))


def test_two_models_of_one_class_keep_their_packed_weights():
    # Dynamo compiles the class once and passes each instance's weights as inputs: called
    # in turn, each model keeps its packed copy (no repacking on every call), and an
    # in-place change to either, or new memory where a freed weight was, is still seen.
    a, b, x = _RowMajorMLP().eval(), _RowMajorMLP().eval(), torch.randn(40, 64)
    with torch.no_grad():
        b.w1.mul_(-1.0)  # a and b now differ in one version counter too
    one = (64 * 96 + 96 * 40) * 4
    with zenith.backend.collect_reports() as reports, torch.no_grad():
        ca, cb = zenith.compile(a), zenith.compile(b)
        for _ in range(3):
            torch.testing.assert_close(ca(x), a(x))
            torch.testing.assert_close(cb(x), b(x))
        assert len(reports) == 1  # one graph, both models' weights kept
        assert sum(r.packed_weight_bytes for r in reports) == 2 * one
        b.w2.mul_(0.5)
        torch.testing.assert_close(ca(x), a(x))
        torch.testing.assert_close(cb(x), b(x))
        a.w2.data = torch.randn(96, 40)  # new storage for a; the old one freed
        torch.testing.assert_close(ca(x), a(x))
        torch.testing.assert_close(cb(x), b(x))
        assert sum(r.packed_weight_bytes for r in reports) == 2 * one


def test_blocks_compiled_one_by_one_keep_their_packed_weights():
    # Regional compilation: each of a model's repeated blocks compiled on its own, one
    # graph serving all of them with each block's weights as inputs. Every block keeps its
    # packed copy across calls (with 4 weight slots, 8 blocks repacked every call).
    torch.manual_seed(0)
    blocks = torch.nn.Sequential(*[_RowMajorMLP() for _ in range(8)]).eval()
    for i, blk in enumerate(blocks):  # distinct weights (a block maps 64 features to 40; run pads back)
        with torch.no_grad():
            blk.w1.mul_(1.0 + 0.1 * i)
            blk.w2.mul_(1.0 - 0.05 * i)
    x = torch.randn(40, 64)
    one = (64 * 96 + 96 * 40) * 4

    def run(mods):
        y = x
        for blk in mods:
            y = torch.nn.functional.pad(blk(y), (0, 24))
        return y

    with zenith.backend.collect_reports() as reports, torch.no_grad():
        compiled = [zenith.compile(blk) for blk in blocks]
        for _ in range(3):
            torch.testing.assert_close(run(compiled), run(blocks))
        assert len(reports) == 1  # one graph for the eight blocks
        assert sum(r.packed_weight_bytes for r in reports) == 8 * one


def test_packed_weights_follow_swaps_and_sets_first_seen_while_nothing_was_packed():
    # A weight swapped out by `.data =`, changed through another tensor (no version bump
    # on the parameter) and swapped back must be repacked; and a model whose weights were
    # packed during a call that found nothing held is still checked afterwards.
    m, x = _RowMajorMLP().eval(), torch.randn(40, 64)
    with torch.no_grad():
        c = zenith.compile(m)
        torch.testing.assert_close(c(x), m(x))
        orig = m.w1.data
        m.w1.data = torch.randn(64, 96) * 0.1
        torch.testing.assert_close(c(x), m(x))
        orig.mul_(2.0)
        m.w1.data = orig
        torch.testing.assert_close(c(x), m(x))
    a, b = _RowMajorMLP().eval(), _RowMajorMLP().eval()
    with torch.no_grad():
        ca, cb = zenith.compile(a, dynamic=True), zenith.compile(b, dynamic=True)
        torch.testing.assert_close(ca(x[:2]), a(x[:2]))  # 2 rows: nothing packed
        torch.testing.assert_close(cb(x), b(x))  # b's weights packed
        b.w1.mul_(2.0)
        torch.testing.assert_close(cb(x), b(x))
        torch.testing.assert_close(ca(x), a(x))


def test_weight_check_reads_no_weight_while_none_is_packed():
    # The per-call cost of the weight check: with nothing packed (nn.Linear weights, few
    # rows) it reads no tensor of a set it knows (only their ids, for the slot); once
    # something is, one version counter per weight some node reads packed (a bias or
    # batch-norm input, read in place, is not read). A new set gets the next slot.
    from zenith.weights import MAX_SETS, WeightWatch

    class Exe:
        holds_packed = False
        drops = 0
        packable_inputs = [0]  # segment input 0 (graph position 1) is read packed, 1 is not
        packable_generation = 1

        def set_constant_inputs(self, positions):
            self.marked = positions

        def drop_packed(self):
            self.drops += 1

    class Spy:
        reads = 0

        def __init__(self, t):
            self.t = t

        @property
        def _version(self):
            Spy.reads += 1
            return self.t._version

        def untyped_storage(self):
            Spy.reads += 1
            return self.t.untyped_storage()

        def is_inference(self):  # asked on a full check only, not counted
            return self.t.is_inference()

    class Unpacked(Spy):
        reads = 0

        @property
        def _version(self):
            Unpacked.reads += 1
            return self.t._version

    exe, w, b = Exe(), torch.nn.Parameter(torch.randn(3)), torch.nn.Parameter(torch.randn(3))
    spy, bias = Spy(w), Unpacked(b)
    watch = WeightWatch([1, 2], [(exe, [(0, 1), (1, 2)])])
    assert exe.marked == [0, 1]
    assert watch.check([None, spy, bias]) == 0  # the first call records the versions and storages
    Spy.reads = Unpacked.reads = 0
    assert watch.check([None, spy, bias]) == 0
    assert Spy.reads == 0 and Unpacked.reads == 0
    exe.holds_packed = True
    assert watch.check([None, spy, bias]) == 0
    assert exe.drops == 0 and Spy.reads == 1 and Unpacked.reads == 0
    with torch.no_grad():
        b.add_(1)  # read in place: no copy to drop
    assert watch.check([None, spy, bias]) == 0 and exe.drops == 0
    with torch.no_grad():
        w.mul_(2)
    assert watch.check([None, spy, bias]) == 0
    assert exe.drops == 1
    others = [torch.nn.Parameter(torch.randn(3)) for _ in range(MAX_SETS)]
    assert [watch.check([None, o, bias]) for o in others[:MAX_SETS - 1]] == list(range(1, MAX_SETS))
    assert exe.drops == 1 and watch.check([None, spy, bias]) == 0
    assert watch.check([None, others[-1], bias]) == 0 and exe.drops == 2  # one set past MAX_SETS: all dropped, slots afresh


def test_weight_check_follows_inputs_that_become_packable():
    # A weight read in place may change without a drop; once a new plan packs it
    # (Executable.packable_inputs grows, with its generation), its version is compared
    # with the last full record, so a change made while it was unwatched drops the copies
    # (one repack more than needed at worst, never a stale one), and then it is watched.
    from zenith.weights import WeightWatch

    class Exe:
        holds_packed = True
        drops = 0
        packable_inputs = []
        packable_generation = 0

        def set_constant_inputs(self, positions):
            pass

        def drop_packed(self):
            self.drops += 1

    exe, w = Exe(), torch.nn.Parameter(torch.randn(3))
    watch = WeightWatch([0], [(exe, [(0, 0)])])
    assert watch.check([w]) == 0 and watch.check([w]) == 0 and exe.drops == 0
    with torch.no_grad():
        w.mul_(2)  # read in place so far: nothing to drop
    assert watch.check([w]) == 0 and exe.drops == 0
    exe.packable_inputs, exe.packable_generation = [0], 1  # a new plan packs it
    assert watch.check([w]) == 0 and exe.drops == 1  # changed since the record: dropped, recorded again
    assert watch.check([w]) == 0 and exe.drops == 1
    with torch.no_grad():
        w.add_(1)
    assert watch.check([w]) == 0 and exe.drops == 2


@pytest.mark.parametrize("rows", [1, 5, 40, 131])
def test_linear_weights_are_read_in_place(rows):
    # No packed copy of nn.Linear's weights at any row count (the GEMM reads W's rows
    # where they are), and the weights' updates are seen without any dropping of copies.
    m, x = _mlp(), torch.randn(rows, 64)
    with zenith.backend.collect_reports() as reports, torch.no_grad():
        c = zenith.compile(m)
        torch.testing.assert_close(c(x), m(x))
        assert reports and sum(r.packed_weight_bytes for r in reports) == 0
        m[0].weight.mul_(-2.0)
        torch.testing.assert_close(c(x), m(x))


def test_weights_are_not_packed_when_asked_or_when_training():
    m, x = _RowMajorMLP(), torch.randn(48, 64)  # weights the GEMM would pack (see above)
    with zenith.backend.collect_reports() as reports, torch.no_grad():
        c = zenith.compile(m, pack_weights=False)
        torch.testing.assert_close(c(x), m(x))
    assert reports and sum(r.packed_weight_bytes for r in reports) == 0
    with zenith.backend.collect_reports() as reports:  # forward of a training step: weights change
        c = zenith.compile(m)
        c(x).sum().backward()
        c(x)
    assert reports and sum(r.packed_weight_bytes for r in reports) == 0


def test_conv_weights_stay_packed_at_inference():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(16, 24, 1), torch.nn.Conv2d(24, 24, 3, groups=24)).eval()
    x = torch.randn(2, 3, 13, 11)
    with zenith.backend.collect_reports() as reports, torch.no_grad():
        c = zenith.compile(m)
        torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)
        # the depthwise conv (groups=24) has its own loop and keeps its weight as is
        assert sum(r.packed_weight_bytes for r in reports) == (16 * 27 + 24 * 16) * 4
        m[2].weight.mul_(0.5)
        torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)


def test_winograd_conv_keeps_transformed_filters_and_refreshes_them():
    """A 3x3 conv with 128+ channels on a 14 x 14 map runs as Winograd F(2x2, 3x3) with
    its filters transformed once (kept like packed weights) and transformed again after
    an in-place update; batch-norm and ReLU fused; against eager, one image and two."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(128, 130, 3, padding=1, bias=False), torch.nn.BatchNorm2d(130),
                            torch.nn.ReLU()).eval()
    m[1].running_mean.normal_()
    m[1].running_var.uniform_(0.5, 2.0)
    with zenith.backend.collect_reports() as reports, torch.no_grad():
        c = zenith.compile(m)
        for x in (torch.randn(1, 128, 14, 13), torch.randn(2, 128, 14, 13)):
            torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=2e-4)
        assert max(r.packed_weight_bytes for r in reports) == 130 * 128 * 9 * 4
        m[0].weight.mul_(0.5)
        torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=2e-4)


def test_torch_side_nodes_on_inputs_alone_do_not_split_segments():
    # A float64 scalar input (what dynamic=True makes of a Python float global like
    # math.pi) feeds fallback ops between native ones: they run before the Zenith
    # segment instead of cutting it in two, and the result matches eager.
    def f(x, pi):
        y = torch.relu(x) + 1.0
        c = torch.sqrt(2.0 / pi).to(torch.float32)  # float64 ops: not native
        return torch.tanh(y * c) - x

    x, pi = torch.randn(6, 5), torch.tensor(3.141592653589793, dtype=torch.float64)
    with zenith.backend.collect_reports() as reports:
        torch.testing.assert_close(zenith.compile(f)(x, pi), f(x, pi))
    (r,) = reports
    assert r.fallback_ops and r.segments == 1, (r.fallback_ops, r.segments)


def test_a_non_cpu_tensor_never_reaches_a_segment():
    # The last guard before the runtime reads a data pointer: a tensor on another device
    # (here "meta", which has no data) is refused with its device named.
    from zenith import callpath

    with pytest.raises(RuntimeError, match="a meta tensor reached a CPU segment"):
        callpath._raw(torch.empty(2, 3, device="meta"), [])
    keep = []
    t = torch.randn(3, 4).t()  # non-contiguous: a contiguous copy is made and kept alive
    ptr, code, shape = callpath._raw(t, keep)
    assert len(keep) == 1 and ptr == keep[0].data_ptr() and shape == (4, 3) and code == 0


def test_outputs_buffers_are_reused_and_empty_cache_frees_them():
    """A training step's large outputs (gradients, saved activations) go back to Zenith's
    buffer cache when PyTorch frees them, and the next step's outputs of the same sizes
    take them (no page faults: ZENITH_OUTPUT_CACHE_MB); zenith.empty_cache frees what it
    holds and says how much. The gradients match eager's either way."""
    if _C.buffer_cache_limit() == 0:
        pytest.skip("no buffer cache (ZENITH_OUTPUT_CACHE_MB=0)")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
    ref = copy.deepcopy(m)
    c = torch.compile(m, backend="zenith")
    x = torch.randn(64, 256)
    zenith.empty_cache()
    for _ in range(3):
        m.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        c(x).pow(2).mean().backward()
        ref(x).pow(2).mean().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    gc.collect()
    # both weights' gradients are 512 KB (a cached size): whichever order the next step
    # writes them in, each takes one of the two buffers just freed
    ptrs = {m[0].weight.grad.data_ptr(), m[2].weight.grad.data_ptr()}
    m.zero_grad(set_to_none=True)
    assert _C.buffer_cache_bytes() >= 2 * 512 * 1024
    c(x).pow(2).mean().backward()
    assert {m[0].weight.grad.data_ptr(), m[2].weight.grad.data_ptr()} == ptrs, "freed gradients' buffers not reused"
    m.zero_grad(set_to_none=True)
    gc.collect()
    held = _C.buffer_cache_bytes()
    assert held >= 2 * 512 * 1024
    assert zenith.empty_cache() == held
    assert _C.buffer_cache_bytes() == 0
