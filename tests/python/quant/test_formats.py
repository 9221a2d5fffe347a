"""The weight formats (zenith.quant.formats): layouts pinned by hand-built blocks, the
quantizers' round-trip error within each format's bound, and every GGUF block type
de-quantized bit for bit as the gguf package does."""
import numpy as np
import pytest
import torch

from zenith.quant.formats import FORMATS, NF4_TABLE, dequantize, error_bound, get_format, quantize_weight
from quant_util import GGUF_FORMATS, ZENITH_FORMATS, gguf_type, random_weight, same_floats

gguf = pytest.importorskip("gguf")


def f16(x):
    return torch.tensor([x], dtype=torch.float16).view(torch.uint8)


def test_table_is_the_contract():
    want = {"q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
            "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210), "int8": (0, 4), "int4_g64": (64, 34),
            "int4_g128": (128, 66), "uint4_g64": (64, 36), "uint4_g128": (128, 68), "nf4": (64, 34)}
    assert {n: (f.block_elems, f.block_bytes) for n, f in FORMATS.items()} == want
    for name in GGUF_FORMATS:  # the GGUF ones are ggml's sizes
        assert gguf.GGML_QUANT_SIZES[gguf_type(name)] == want[name]


# -- layouts, from the contract's table, by hand --
def test_int8_layout():
    # f32 scale (little endian), then K x int8; value = scale * q
    row = torch.cat([torch.tensor([0.5], dtype=torch.float32).view(torch.uint8),
                     torch.tensor([1, -2, 127, -127, 0], dtype=torch.int8).view(torch.uint8)])
    assert dequantize(row[None], "int8").tolist() == [[0.5, -1.0, 63.5, -63.5, 0.0]]


def test_int4_g64_layout():
    # f16 d, then per 32-element sub-chunk 16 bytes: byte j = elem j (low) | elem j+16 (high); d*(q-8)
    q = torch.arange(64) % 16
    sub = [(q[32 * s + torch.arange(16)] | (q[32 * s + 16 + torch.arange(16)] << 4)).to(torch.uint8) for s in (0, 1)]
    w = torch.cat([f16(0.25), *sub])[None]
    assert dequantize(w, "int4_g64")[0].tolist() == [0.25 * (v - 8) for v in q.tolist()]


def test_uint4_g128_layout():
    # f16 d, f16 m, then four sub-chunks as q4_0; d*q + m
    q = (torch.arange(128) * 7) % 16
    subs = [(q[32 * s + torch.arange(16)] | (q[32 * s + 16 + torch.arange(16)] << 4)).to(torch.uint8)
            for s in range(4)]
    w = torch.cat([f16(0.5), f16(-2.0), *subs])[None]
    assert dequantize(w, "uint4_g128")[0].tolist() == [0.5 * v - 2.0 for v in q.tolist()]


def test_nf4_layout():
    # f16 absmax, then 2 sub-chunks as q4_0; NF4[q] * absmax (bitsandbytes' table)
    q = torch.arange(64) % 16
    subs = [(q[32 * s + torch.arange(16)] | (q[32 * s + 16 + torch.arange(16)] << 4)).to(torch.uint8) for s in (0, 1)]
    w = torch.cat([f16(3.0), *subs])[None]
    want = torch.tensor([NF4_TABLE[v] for v in q.tolist()], dtype=torch.float32) * 3.0
    assert torch.equal(dequantize(w, "nf4")[0], want)
    assert NF4_TABLE[7] == 0.0 and NF4_TABLE[0] == -1.0 and NF4_TABLE[15] == 1.0 and len(NF4_TABLE) == 16


def test_q5_0_fifth_bit_is_bit_j_of_qh():
    # f16 d, u32 qh (bit j = 5th bit of element j), 16 bytes as q4_0; d*(q-16)
    q = (torch.arange(32) * 5) % 32
    qh = sum(int(v >> 4) << j for j, v in enumerate(q.tolist()))
    lo = q & 15
    w = torch.cat([f16(1.0), torch.tensor([qh], dtype=torch.int64).to(torch.int32).view(torch.uint8),
                   (lo[:16] | (lo[16:] << 4)).to(torch.uint8)])[None]
    assert dequantize(w, "q5_0")[0].tolist() == [float(v - 16) for v in q.tolist()]


# -- quantizers: round trip within each format's stated bound --
@pytest.mark.parametrize("fmt", ZENITH_FORMATS)
@pytest.mark.parametrize("dist", ["normal", "uniform", "outliers", "zeros", "constant"])
def test_round_trip_within_bound(fmt, dist):
    # The bound (formats.error_bound, per element): half a step (int8: max|row|/254;
    # int4 sym: max|group|/16, a whole step /8 for the clipped opposite extreme; asym:
    # (max-min)/30; nf4: the codebook's widest half-gap 0.152 x absmax), plus the f16
    # rounding of the stored scale and minimum.
    g = torch.Generator().manual_seed(1)
    n, k = 7, 256
    w = {"normal": torch.randn(n, k, generator=g), "uniform": torch.rand(n, k, generator=g) * 4 - 1,
         "outliers": torch.randn(n, k, generator=g) * torch.where(torch.rand(n, k, generator=g) < 0.02, 50.0, 1.0),
         "zeros": torch.zeros(n, k), "constant": torch.full((n, k), -0.3)}[dist]
    q = quantize_weight(w, fmt)
    assert q.dtype == torch.uint8 and q.shape == (n, get_format(fmt).row_bytes(k))
    back = dequantize(q, fmt)
    err = (back - w).abs()
    bound = error_bound(w, fmt)
    assert bool((err <= bound).all()), (err - bound).max()
    if dist == "zeros":
        assert torch.equal(back, w)


@pytest.mark.parametrize("fmt", ZENITH_FORMATS)
def test_quantizing_in_slices_of_rows_changes_no_byte(fmt, monkeypatch):
    # quantize_weight quantizes a slice of rows at a time (bounded temporaries); slices
    # of 1, 2 or 3 rows (and a last, shorter one) give the bytes of one whole call.
    from zenith.quant import formats

    g = torch.Generator().manual_seed(2)
    w = torch.randn(11, 256, generator=g) * torch.linspace(0.1, 3, 11)[:, None]
    whole = quantize_weight(w, fmt)
    for values in (1, 512, 768):
        monkeypatch.setattr(formats, "_QUANTIZE_VALUES", values)
        assert torch.equal(quantize_weight(w, fmt), whole), values
    assert quantize_weight(w[:0], fmt).shape == (0, whole.shape[1])


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0", "q4_1"])
def test_quantizers_match_ggml(fmt):
    # q4_0 / q4_1 (int4 with group 32) and q8_0 bytes equal the gguf package's, which
    # follow ggml's reference quantizers: files Zenith writes would read the same in llama.cpp
    x = np.random.default_rng(2).standard_normal((9, 320)).astype(np.float32)
    x[3] = 0
    want = gguf.quants.quantize(x, gguf_type(fmt))
    got = quantize_weight(torch.from_numpy(x), fmt).numpy()
    assert np.array_equal(got, want)


def test_quantize_errors():
    with pytest.raises(ValueError, match="K=100 is not a multiple of its block of 32"):
        quantize_weight(torch.randn(4, 100), "q4_0")
    with pytest.raises(ValueError, match="read from GGUF files only"):
        quantize_weight(torch.randn(4, 256), "q4_k")
    with pytest.raises(ValueError, match="unknown quantized format 'q3_k'"):
        quantize_weight(torch.randn(4, 256), "q3_k")
    with pytest.raises(ValueError, match="2-d weight"):
        quantize_weight(torch.randn(4, 4, 32), "int8")
    with pytest.raises(ValueError, match="not a whole number of 18-byte blocks"):
        dequantize(torch.zeros(2, 20, dtype=torch.uint8), "q4_0")
    with pytest.raises(ValueError, match="2-d uint8"):
        dequantize(torch.zeros(2, 18), "q4_0")


# -- GGUF block types: bit for bit as gguf.quants.dequantize --
@pytest.mark.parametrize("fmt", GGUF_FORMATS)
@pytest.mark.parametrize("scales", ["sane", "any bytes"])
def test_gguf_dequantize_bit_exact(fmt, scales):
    f = FORMATS[fmt]
    if scales == "sane":
        w = random_weight(fmt, 13, 3 * f.block_elems, seed=3)
    else:  # every byte random: f16 scales include subnormals, infinities and NaNs
        w = torch.from_numpy(np.random.default_rng(4).integers(0, 256, (13, 5 * f.block_bytes), dtype=np.uint8))
    with np.errstate(all="ignore"):
        want = gguf.quants.dequantize(w.numpy(), gguf_type(fmt))
    assert same_floats(dequantize(w, fmt).numpy(), want)


def test_dequantize_rows():
    w = random_weight("q4_k", 10, 512, seed=5)
    rows = torch.tensor([7, 0, 7, 3])
    assert torch.equal(dequantize(w, "q4_k", rows=rows), dequantize(w, "q4_k")[rows])


def test_reference_matches_native_dequantize():
    # needs the qkern merge: the C++ scalar reference (_C.qdequantize) bit for bit as this
    # one, and the core's format table as this table
    from zenith import _C

    assert _C.quant_formats() == {n: (f.block_elems, f.block_bytes) for n, f in FORMATS.items()}
    for fmt, f in FORMATS.items():
        k = 2 * (f.block_elems or 48)
        w = random_weight(fmt, 9, k, seed=6)
        assert same_floats(_C.qdequantize(w, fmt).numpy(), dequantize(w, fmt).numpy()), fmt
