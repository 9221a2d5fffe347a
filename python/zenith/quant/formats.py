"""Quantized weight formats: the table, pure-torch quantizers and reference dequantizers.

A quantized weight is one uint8 tensor [N, row_bytes] (row n = output channel n), each
row a run of blocks along K (docs: /work/notes/quant-contract.md, the seam with the C++
kernels). The GGUF types (q8_0 ... q6_k) are ggml's block layouts bit for bit; the others
are Zenith's own. Everything here is plain torch, written from the layouts and not from
the C++ side: the dequantizers are the independent judge the native kernels are tested
against, and the eager path of the custom ops when the native core lacks them.

Rounding follows ggml's reference quantizers (quantize_row_q4_0_ref and friends), so
q4_0 / q4_1 / q8_0 bytes made here equal the gguf package's and llama.cpp's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

QK_K = 256  # elements of a ggml k-quant super-block

# bitsandbytes' NF4 codebook (bitsandbytes/functional.py, get_4bit_type("nf4")): the
# quantiles of N(0, 1) scaled to [-1, 1], with an exact zero.
NF4_TABLE = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
)


@dataclass(frozen=True)
class Format:
    name: str
    block_elems: int  # 0: one block per row (int8, whose "block" is the whole row)
    block_bytes: int  # for int8: the bytes a row carries besides its K values (the scale)
    dequantize: Callable[[torch.Tensor], torch.Tensor]  # uint8 [N, row_bytes] -> f32 [N, K]
    quantize: Optional[Callable[[torch.Tensor], torch.Tensor]] = None  # f32 [N, K] -> uint8 [N, row_bytes]
    ggml_type: Optional[str] = None  # the GGMLQuantizationType name of a GGUF format

    def row_bytes(self, k: int) -> int:
        """Bytes of one row of K elements (ValueError if K is not a whole number of blocks)."""
        if self.block_elems == 0:
            return k + self.block_bytes
        if k % self.block_elems:
            raise ValueError(f"{self.name}: K={k} is not a multiple of its block of {self.block_elems} elements")
        return k // self.block_elems * self.block_bytes

    def k_of(self, row_bytes: int) -> int:
        """K from a row's byte count (ValueError if that is not a whole number of blocks)."""
        if self.block_elems == 0:
            if row_bytes <= self.block_bytes:
                raise ValueError(f"{self.name}: a row of {row_bytes} bytes holds no values "
                                 f"(each row is a {self.block_bytes}-byte scale, then K int8 values)")
            return row_bytes - self.block_bytes
        if row_bytes % self.block_bytes:
            raise ValueError(f"{self.name}: a row of {row_bytes} bytes is not a whole number of "
                             f"{self.block_bytes}-byte blocks")
        return row_bytes // self.block_bytes * self.block_elems


# ------------------------------------------------------------------ byte helpers
def _blocks(w, fmt_bytes):
    """uint8 [N, row_bytes] -> [N, blocks per row, block bytes]."""
    return w.reshape(w.shape[0], -1, fmt_bytes)


def _as(b, dtype):
    """uint8 [..., n * size] reinterpreted as dtype [..., n], from a fresh dense copy (a
    view of a slice can have strides the reinterpretation cannot take)."""
    return b.new_empty(b.shape).copy_(b).view(dtype)


def _f16(b):
    """uint8 [..., 2] (little-endian f16) -> f32 [..., 1]."""
    return _as(b, torch.float16).float()


def _u32(b):
    """uint8 [..., 4] (little-endian u32) -> int64 [..., 1]."""
    return _as(b, torch.int32).to(torch.int64) & 0xFFFFFFFF


def _nibbles(qs):
    """uint8 [..., 16*s] laid out as s q4_0 sub-chunks -> uint8 [..., 32*s]: in each
    sub-chunk byte j holds element j (low nibble) and element j+16 (high nibble)."""
    q = qs.reshape(*qs.shape[:-1], -1, 16)
    return torch.cat([q & 0x0F, q >> 4], dim=-1).reshape(*qs.shape[:-1], -1)


def _pack_nibbles(q):
    """The inverse of _nibbles: uint8 values < 16, [..., 32*s] -> [..., 16*s]."""
    q = q.reshape(*q.shape[:-1], -1, 2, 16)
    return (q[..., 0, :] | (q[..., 1, :] << 4)).reshape(*q.shape[:-3], -1)


def _f16_bytes(x):
    """f32 [..., 1] -> its f16 as uint8 [..., 2]."""
    return x.to(torch.float16).contiguous().view(torch.uint8)


# ------------------------------------------------------------------ dequantizers
def _dq_q8_0(w):
    b = _blocks(w, 34)
    d, q = _f16(b[..., :2]), b[..., 2:].view(torch.int8).float()
    return (q * d).reshape(w.shape[0], -1)


def _fifth_bits(qh):
    """u32 [..., 1] -> uint8 [..., 32]: bit j as element j's fifth bit (value 16)."""
    bit = torch.arange(32, dtype=torch.int64, device=qh.device)
    return (((qh >> bit) & 1) << 4).to(torch.uint8)


def _dq_q5_0(w):
    b = _blocks(w, 22)
    d, qh, ql = _f16(b[..., :2]), _u32(b[..., 2:6]), _nibbles(b[..., 6:])
    q = (ql | _fifth_bits(qh)).to(torch.int8) - 16
    return (d * q.float()).reshape(w.shape[0], -1)


def _dq_q5_1(w):
    b = _blocks(w, 24)
    d, m, qh, ql = _f16(b[..., :2]), _f16(b[..., 2:4]), _u32(b[..., 4:8]), _nibbles(b[..., 8:])
    q = ql | _fifth_bits(qh)
    return (d * q.float() + m).reshape(w.shape[0], -1)


def _arange_u8(n, step, like):
    """[[0], [step], ... [(n-1)*step]] as uint8 (shift counts), on like's device."""
    return torch.arange(0, n * step, step, dtype=torch.uint8, device=like.device).reshape(n, 1)


def _k4_scales(s):
    """ggml's get_scale_min_k4 for all 8 sub-blocks: uint8 [..., 12] -> (scales, mins), [..., 8] each."""
    s0, s1, s2 = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = torch.cat([s0 & 63, (s2 & 0x0F) | ((s0 >> 6) << 4)], dim=-1)
    mn = torch.cat([s1 & 63, (s2 >> 4) | ((s1 >> 6) << 4)], dim=-1)
    return sc, mn


def _k4_low_bits(qs):
    """128 bytes of q4_K/q5_K qs -> uint8 [..., 8, 32]: four 32-byte chunks, chunk c holding
    sub-block 2c in its low nibbles and sub-block 2c+1 in its high ones."""
    q = qs.reshape(*qs.shape[:-1], 4, 1, 32)
    return torch.cat([q & 0x0F, q >> 4], dim=-2).reshape(*qs.shape[:-1], 8, 32)


def _dq_q4_k(w):
    b = _blocks(w, 144)
    d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    sc, mn = _k4_scales(b[..., 4:16])
    q = _k4_low_bits(b[..., 16:144]).float()
    scale = (d * sc.float()).unsqueeze(-1)
    offset = (dmin * mn.float()).unsqueeze(-1)
    return (scale * q - offset).reshape(w.shape[0], -1)


def _dq_q5_k(w):
    b = _blocks(w, 176)
    d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    sc, mn = _k4_scales(b[..., 4:16])
    qh = b[..., 16:48].unsqueeze(-2)  # [..., 1, 32]: bit i of byte l = sub-block i, element l
    q = (_k4_low_bits(b[..., 48:176]) | (((qh >> _arange_u8(8, 1, qh)) & 1) << 4)).float()
    scale = (d * sc.float()).unsqueeze(-1)
    offset = (dmin * mn.float()).unsqueeze(-1)
    return (scale * q - offset).reshape(w.shape[0], -1)


def _dq_q6_k(w):
    b = _blocks(w, 210)
    lead = b.shape[:-1]
    ql = b[..., 0:128].reshape(*lead, 2, 2, 32)  # [half, 32-byte row, l]
    qh = b[..., 128:192].reshape(*lead, 2, 1, 32)  # [half, 1, l]
    sc = b[..., 192:208].view(torch.int8).float()
    d = _f16(b[..., 208:210])
    # per half of 128: elements 0-31 / 32-63 are the low nibbles of ql rows 0 / 1, 64-95 /
    # 96-127 their high nibbles; the top two bits come from qh shifted by 0, 2, 4, 6.
    low = torch.cat([ql & 0x0F, ql >> 4], dim=-2)  # [half, 4, 32]
    q = (low | (((qh >> _arange_u8(4, 2, qh)) & 3) << 4)).to(torch.int8) - 32
    scale = (d * sc).reshape(*lead, 16, 1)
    return (scale * q.reshape(*lead, 16, 16).float()).reshape(w.shape[0], -1)


def _dq_int8(w):
    scale = _as(w[:, :4], torch.float32)
    q = w[:, 4:].view(torch.int8).float()
    return scale * q


def _dq_sym4(g):
    """q4_0 (g = 32) and int4_g64/g128: f16 d, then g/32 sub-chunks as q4_0; d * (q - 8)."""
    def dq(w):
        b = _blocks(w, 2 + g // 2)
        d, q = _f16(b[..., :2]), _nibbles(b[..., 2:])
        return (d * (q.to(torch.int8) - 8).float()).reshape(w.shape[0], -1)
    return dq


def _dq_asym4(g):
    """q4_1 (g = 32) and uint4_g64/g128: f16 d, f16 m, then sub-chunks as q4_0; d * q + m."""
    def dq(w):
        b = _blocks(w, 4 + g // 2)
        d, m, q = _f16(b[..., :2]), _f16(b[..., 2:4]), _nibbles(b[..., 4:])
        return (d * q.float() + m).reshape(w.shape[0], -1)
    return dq


def _nf4_table(like):
    return torch.tensor(NF4_TABLE, dtype=torch.float32, device=like.device)


def _dq_nf4(w):
    b = _blocks(w, 34)
    absmax, q = _f16(b[..., :2]), _nibbles(b[..., 2:])
    return (_nf4_table(w)[q.long()] * absmax).reshape(w.shape[0], -1)


# ------------------------------------------------------------------ quantizers
def _as_2d(x):
    if x.dim() != 2:
        raise ValueError(f"expected a 2-d weight [N, K], got shape {tuple(x.shape)}")
    return x.detach().float()


def _groups(x, g):
    x = _as_2d(x)
    if x.shape[1] % g:
        raise ValueError(f"K={x.shape[1]} is not a multiple of the group size {g}")
    return x.reshape(x.shape[0], -1, g)


def _inverse(d):
    return torch.where(d == 0, torch.zeros_like(d), 1.0 / d)


def _q_sym4(g):
    """ggml's q4_0 scheme over groups of g: d = (the signed value of largest magnitude) / -8,
    q = min(15, trunc(x/d + 8.5)); the extreme value maps to q=0 exactly."""
    def quant(x):
        xb = _groups(x, g)
        imax = xb.abs().argmax(dim=-1, keepdim=True)
        d = torch.gather(xb, -1, imax) / -8
        q = torch.trunc(xb * _inverse(d) + 8.5).clamp(0, 15).to(torch.uint8)
        return torch.cat([_f16_bytes(d), _pack_nibbles(q)], dim=-1).reshape(x.shape[0], -1)
    return quant


def _q_asym4(g):
    """ggml's q4_1 scheme over groups of g: d = (max - min) / 15, m = min, q = trunc((x - min)/d + 0.5)."""
    def quant(x):
        xb = _groups(x, g)
        mn, mx = xb.amin(dim=-1, keepdim=True), xb.amax(dim=-1, keepdim=True)
        d = (mx - mn) / 15
        q = torch.trunc((xb - mn) * _inverse(d) + 0.5).clamp(0, 15).to(torch.uint8)
        return torch.cat([_f16_bytes(d), _f16_bytes(mn), _pack_nibbles(q)], dim=-1).reshape(x.shape[0], -1)
    return quant


def _roundf(v):
    """C's roundf (half away from zero), computed as the gguf package does (exact near .5)."""
    a = v.abs()
    f = torch.floor(a)
    return torch.sign(v) * (f + torch.floor(2 * (a - f)))


def _q_q8_0(x):
    xb = _groups(x, 32)
    d = xb.abs().amax(dim=-1, keepdim=True) / 127
    q = _roundf(xb * _inverse(d)).to(torch.int8).view(torch.uint8)
    return torch.cat([_f16_bytes(d), q], dim=-1).reshape(x.shape[0], -1)


def _q_int8(x, qmax=127):
    """Per output channel, symmetric: scale = max|row| / qmax (f32), q = round(x / scale);
    qmax 127, or 63 for 7-bit codes (zenith.quantize's conv_weight_bits / linear_weight_bits)."""
    x = _as_2d(x)
    scale = x.abs().amax(dim=1, keepdim=True) / qmax
    q = torch.round(x * _inverse(scale)).clamp(-qmax, qmax).to(torch.int8).view(torch.uint8)
    return torch.cat([scale.contiguous().view(torch.uint8), q], dim=1)


def _q_nf4(x):
    """bitsandbytes' NF4 over blocks of 64: absmax per block (stored as f16), each value
    the nearest code of x / absmax. Normalising by the stored f16 absmax keeps the
    reconstruction the nearest one the stored bytes can express."""
    xb = _groups(x, 64)
    absmax = xb.abs().amax(dim=-1, keepdim=True).to(torch.float16).float()
    xn = (xb * _inverse(absmax)).clamp(-1, 1)
    table = _nf4_table(x)
    q = torch.bucketize(xn, (table[1:] + table[:-1]) / 2).to(torch.uint8)
    return torch.cat([_f16_bytes(absmax), _pack_nibbles(q)], dim=-1).reshape(x.shape[0], -1)


# ------------------------------------------------------------------ the table
# Contract order (quant-contract.md); the names are the `format` strings everywhere.
FORMATS = {f.name: f for f in [
    Format("q8_0", 32, 34, _dq_q8_0, _q_q8_0, "Q8_0"),
    Format("q4_0", 32, 18, _dq_sym4(32), _q_sym4(32), "Q4_0"),  # int4, group 32, symmetric
    Format("q4_1", 32, 20, _dq_asym4(32), _q_asym4(32), "Q4_1"),  # ... asymmetric
    Format("q5_0", 32, 22, _dq_q5_0, None, "Q5_0"),
    Format("q5_1", 32, 24, _dq_q5_1, None, "Q5_1"),
    Format("q4_k", QK_K, 144, _dq_q4_k, None, "Q4_K"),
    Format("q5_k", QK_K, 176, _dq_q5_k, None, "Q5_K"),
    Format("q6_k", QK_K, 210, _dq_q6_k, None, "Q6_K"),
    Format("int8", 0, 4, _dq_int8, _q_int8),
    Format("int4_g64", 64, 34, _dq_sym4(64), _q_sym4(64)),
    Format("int4_g128", 128, 66, _dq_sym4(128), _q_sym4(128)),
    Format("uint4_g64", 64, 36, _dq_asym4(64), _q_asym4(64)),
    Format("uint4_g128", 128, 68, _dq_asym4(128), _q_asym4(128)),
    Format("nf4", 64, 34, _dq_nf4, _q_nf4),
]}
GGML_FORMATS = {f.ggml_type: f.name for f in FORMATS.values() if f.ggml_type}  # "Q4_K" -> "q4_k"


def get_format(name) -> Format:
    f = FORMATS.get(name) if isinstance(name, str) else None
    if f is None:
        raise ValueError(f"unknown quantized format {name!r}; formats: {', '.join(FORMATS)}")
    return f


def check_weight(w, fmt, k=None):
    """K of a quantized weight; ValueError naming what is wrong (dtype, rank, bytes, K)."""
    f = get_format(fmt)
    if not isinstance(w, torch.Tensor) or w.dtype != torch.uint8 or w.dim() != 2:
        what = f"{w.dtype} tensor of shape {tuple(w.shape)}" if isinstance(w, torch.Tensor) else type(w).__name__
        raise ValueError(f"{f.name}: the weight must be a 2-d uint8 tensor [N, row_bytes], got a {what}")
    kw = f.k_of(w.shape[1])
    if k is not None and k != kw:
        raise ValueError(f"{f.name}: the input's last dimension is {k} but the weight's rows hold K={kw}")
    return kw


_QUANTIZE_VALUES = 1 << 22  # weight values quantize_weight quantizes at a time


def quantize_weight(w, fmt, int8_max=127) -> torch.Tensor:
    """A float weight [N, K] as the bytes of `fmt` (uint8 [N, row_bytes]). int8_max: for
    "int8", the largest code (63: 7-bit codes, the same format at half the levels)."""
    f = get_format(fmt)
    if f.quantize is None:
        raise ValueError(f"{f.name} is read from GGUF files only; Zenith quantizes to "
                         + ", ".join(n for n, g in FORMATS.items() if g.quantize))
    if int8_max != 127 and (f.name != "int8" or isinstance(int8_max, bool) or not isinstance(int8_max, int)
                            or not 1 <= int8_max <= 127):
        raise ValueError(f"quantize_weight: int8_max is the largest int8 code, an int in [1, 127], for the int8 "
                         f"format only; got {int8_max!r} for {f.name}")
    row_bytes = f.row_bytes(w.shape[1])  # the error for a K that is not a whole number of blocks
    # A slice of rows at a time (rows are independent in every format): the float
    # temporaries of quantizing stay ~16 MiB each rather than several copies of the
    # whole weight (an LM head of 32000 x 2048 is 262 MB in fp32).
    out = torch.empty(w.shape[0], row_bytes, dtype=torch.uint8, device=w.device)
    step = max(1, _QUANTIZE_VALUES // max(1, w.shape[1]))
    for n in range(0, w.shape[0], step):
        out[n:n + step] = f.quantize(w[n:n + step]) if int8_max == 127 else _q_int8(w[n:n + step], int8_max)
    return out


def dequantize(w, fmt, rows=None) -> torch.Tensor:
    """The reference: uint8 [N, row_bytes] -> f32 [N, K] (rows: an index tensor to take
    only those rows, in that order)."""
    check_weight(w, fmt)
    if rows is not None:
        w = w[rows]
    return get_format(fmt).dequantize(w.contiguous())


def fp32_bytes(w, fmt) -> int:
    """What the weight would take in fp32."""
    return w.shape[0] * get_format(fmt).k_of(w.shape[1]) * 4


def error_bound(w, fmt):
    """Per-element bound on |dequantize(quantize(w)) - w| for the formats Zenith quantizes
    to, as an f32 tensor shaped like w: half a quantization step, a whole step where a
    symmetric 4-bit format clips the value opposite its extreme (+8 steps is not
    representable), and the f16 rounding of the stored scale (and min) on top."""
    f = get_format(fmt)
    x = w.detach().float()
    eps16 = 2.0 ** -11  # relative rounding of an f16 normal
    if f.name == "int8":
        return (x.abs().amax(dim=1, keepdim=True) / 127 * (0.5 + 1e-6)).expand_as(x)
    g = f.block_elems
    xb = x.reshape(x.shape[0], -1, g)
    amax = xb.abs().amax(dim=-1, keepdim=True)
    if f.name in ("q4_0", "int4_g64", "int4_g128"):
        bound = amax / 8 * (1 + 8 * eps16) + 1e-7
    elif f.name in ("q4_1", "uint4_g64", "uint4_g128"):
        mn, mx = xb.amin(dim=-1, keepdim=True), xb.amax(dim=-1, keepdim=True)
        d = (mx - mn) / 15
        bound = d / 2 + (mn.abs() + 15 * d) * eps16 + 1e-7
    elif f.name == "q8_0":
        bound = amax / 127 * (0.5 + 127 * eps16) + 1e-7
    elif f.name == "nf4":
        half_gap = max(b - a for a, b in zip(NF4_TABLE, NF4_TABLE[1:])) / 2
        bound = amax * (half_gap + 2 * eps16) + 1e-7
    else:
        raise ValueError(f"{f.name}: no quantizer, so no round-trip bound")
    return bound.expand_as(xb).reshape(x.shape)

