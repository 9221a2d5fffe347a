"""The custom ops (torch.ops.zenith.qlinear / qembedding) and QLinear / QEmbedding:
eager against the torch reference (F.linear over the de-quantized weight), shapes,
errors, and their lowering to the native ops."""
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import zenith
from zenith.quant import QEmbedding, QLinear, dequantize
from zenith.quant.formats import FORMATS
from quant_util import KERNEL_TOL, normalized_error, random_weight

ALL = list(FORMATS)


def _k(fmt):
    return 2 * (FORMATS[fmt].block_elems or 96)


@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("lead", [(1,), (5,), (2, 3), (3, 1, 4)])
def test_qlinear_matches_reference(fmt, lead):
    # eager (the native kernel once merged) against x @ dequantize(w)^T + b in fp32,
    # within KERNEL_TOL of the output's largest magnitude (see quant_util)
    k, n = _k(fmt), 37
    w = random_weight(fmt, n, k, seed=1)
    x, b = torch.randn(*lead, k), torch.randn(n)
    want = F.linear(x, dequantize(w, fmt), b)
    got = torch.ops.zenith.qlinear(x, w, b, fmt)
    assert got.shape == (*lead, n) and got.dtype == torch.float32
    assert normalized_error(got, want) <= KERNEL_TOL
    no_bias = torch.ops.zenith.qlinear(x, w, None, fmt)
    assert normalized_error(no_bias, F.linear(x, dequantize(w, fmt))) <= KERNEL_TOL


def test_qlinear_keeps_the_input_dtype():
    w = random_weight("q8_0", 8, 64)
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    y = QLinear(w, "q8_0")(x)
    assert y.dtype == torch.bfloat16 and y.shape == (3, 8)


def test_qlinear_errors_name_the_problem():
    w = random_weight("q4_0", 8, 64)
    with pytest.raises(ValueError, match="last dimension is 48 but the weight's rows hold K=64"):
        torch.ops.zenith.qlinear(torch.randn(2, 48), w, None, "q4_0")
    with pytest.raises(ValueError, match="unknown quantized format 'q9'"):
        torch.ops.zenith.qlinear(torch.randn(2, 64), w, None, "q9")
    with pytest.raises(ValueError, match="2-d uint8"):
        torch.ops.zenith.qlinear(torch.randn(2, 64), w.float(), None, "q4_0")
    with pytest.raises(ValueError, match="not a whole number of 18-byte blocks"):
        QLinear(w[:, :20], "q4_0")
    # the fake implementation checks too (Dynamo wraps its error, keeping the message)
    with pytest.raises(Exception, match="last dimension is 32 but the weight's rows hold K=64"):
        torch.compile(QLinear(w, "q4_0"), backend="zenith", fullgraph=True)(torch.randn(2, 32))


@pytest.mark.parametrize("fmt", ALL)
def test_qembedding_matches_reference(fmt):
    v, k = 50, _k(fmt)
    w = random_weight(fmt, v, k, seed=2)
    ids = torch.tensor([[0, 49, 7], [7, 3, 3]])
    got = torch.ops.zenith.qembedding(w, ids, fmt)
    assert torch.equal(got, dequantize(w, fmt)[ids])  # a lookup: exact
    assert torch.equal(torch.ops.zenith.qembedding(w, ids.int(), fmt), got)


def test_qembedding_rejects_ids_out_of_range():
    w = random_weight("q8_0", 10, 32)
    for bad in (10, -1):
        with pytest.raises(IndexError, match=f"{bad}.*out of range"):
            torch.ops.zenith.qembedding(w, torch.tensor([1, bad]), "q8_0")
    with pytest.raises(TypeError, match="int64 or int32"):
        torch.ops.zenith.qembedding(w, torch.tensor([1.0]), "q8_0")


def test_modules_from_float():
    lin = torch.nn.Linear(64, 24)
    q = QLinear.from_float(lin, "int4_g64")
    x = torch.randn(4, 64)
    assert q.weight.dtype == torch.uint8 and q.weight.shape == (24, 34)
    assert torch.equal(q.bias, lin.bias)
    assert normalized_error(q(x), lin(x)) < 0.1
    assert "format=int4_g64" in repr(q) and "bytes=" in repr(q)
    emb = torch.nn.Embedding(30, 64)
    qe = QEmbedding.from_float(emb, "q8_0")
    ids = torch.tensor([1, 29])
    assert normalized_error(qe(ids), emb(ids)) < 0.01
    assert "format=q8_0" in repr(qe)


def test_scaled_word_embedding_keeps_its_scale():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3.modeling_gemma3 import Gemma3TextScaledWordEmbedding

    emb = Gemma3TextScaledWordEmbedding(40, 64, 0, embed_scale=64**0.5)
    q = QEmbedding.from_float(emb, "q8_0")
    ids = torch.tensor([[3, 39]])
    want = F.embedding(ids, dequantize(q.weight, "q8_0")) * emb.embed_scale
    assert torch.equal(q(ids), want)
    assert transformers  # (imported for the module above)


def test_format_codes_print_by_name():
    # needs the qkern merge: the code the importer passes as `format` is the core's code
    # for that name (the printed graph names it)
    from zenith import _C
    from zenith.importer import qformat_code

    for fmt, f in FORMATS.items():
        k = 2 * (f.block_elems or 96)
        g = _C.Graph()
        x = g.add_input("x", "f32", [3, k])
        w = g.add_input("w", "u8", [5, f.row_bytes(k)])
        (y,) = g.add_node("qmatmul", [x, w], {"format": qformat_code(fmt)})
        assert g.value_shape(y) == [3, 5]
        assert re.search(rf"format={fmt}\b", str(g)), str(g)


@pytest.mark.parametrize("fmt", ["q4_0", "q6_k", "int8", "nf4"])
def test_compiled_runs_the_native_ops(fmt):
    # needs the qkern merge: qlinear and qembedding lower to qmatmul / qembedding and run
    # in the Zenith runtime (no fallback), matching eager tightly (the same kernels)
    k = _k(fmt)
    m = torch.nn.Sequential(QEmbedding(random_weight(fmt, 20, k, seed=3), fmt),
                            QLinear(random_weight(fmt, 16, k, seed=4), fmt, torch.randn(16)), torch.nn.GELU(),
                            torch.nn.Linear(16, 4)).eval()
    ids = torch.randint(0, 20, (2, 5))
    r = zenith.explain(m, ids)
    assert not r.fallback_ops, r.fallback_ops
    assert r.zenith_ops.get("qmatmul") == 1 and r.zenith_ops.get("qembedding") == 1, r.zenith_ops
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(m, backend="zenith")(ids), m(ids), rtol=1e-4, atol=1e-5)


def test_import_zenith_needs_neither_gguf_nor_transformers():
    code = "import sys, zenith; print(sorted(m for m in ('gguf', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("how", ["direct", "AOTAutograd", "dynamic"])
def test_custom_ops_stay_one_node(monkeypatch, how):
    # Dynamo, the direct ATen trace and AOTAutograd keep each custom op as one node
    # (nothing decomposes it), with the uint8 weights as graph inputs (buffers)
    from zenith import backend as zbackend

    seen = []
    real = zbackend._compile_fx

    def spy(gm, example_inputs, options, static_inputs=None, aten_trace="AOTAutograd"):
        seen.append((aten_trace, [str(n.target) for n in gm.graph.nodes if n.op == "call_function"],
                     [getattr(n.meta["val"], "dtype", None) for n in gm.graph.nodes if n.op == "placeholder"]))
        return real(gm, example_inputs, options, static_inputs=static_inputs, aten_trace=aten_trace)

    monkeypatch.setattr(zbackend, "_compile_fx", spy)
    m = torch.nn.Sequential(QEmbedding(random_weight("q4_k", 20, 256), "q4_k"),
                            QLinear(random_weight("q4_0", 8, 256), "q4_0", torch.randn(8))).eval()
    ids = torch.randint(0, 20, (2, 3))
    kw = {"dynamic": True} if how == "dynamic" else {"options": {"aot_inference": how == "AOTAutograd"}}
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(m, backend="zenith", **kw)(ids), m(ids))
    [(trace, targets, dtypes)] = seen
    assert trace == ("direct" if how == "direct" else "AOTAutograd")
    assert targets == ["zenith.qembedding.default", "zenith.qlinear.default"]
    assert dtypes.count(torch.uint8) == 2
