"""Shared by the quantization tests: valid random blocks of every format, and the error
measure the kernel tests use."""
import numpy as np
import torch

from zenith import _C
from zenith.quant.formats import FORMATS, quantize_weight

# where each GGUF block keeps its f16 scale fields (byte offsets in the block)
_F16_FIELDS = {"q8_0": (0,), "q4_0": (0,), "q4_1": (0, 2), "q5_0": (0,), "q5_1": (0, 2),
               "q4_k": (0, 2), "q5_k": (0, 2), "q6_k": (208,)}

ZENITH_FORMATS = [n for n, f in FORMATS.items() if f.quantize is not None]
GGUF_FORMATS = [n for n, f in FORMATS.items() if f.ggml_type]


def random_weight(fmt, n, k, seed=0):
    """uint8 [n, row_bytes] of `fmt` with finite, moderate scales: made by the quantizer
    where Zenith has one, else random bytes with the f16 fields set to values in
    [0.001, 0.05] (so de-quantized values stay O(1))."""
    g = torch.Generator().manual_seed(seed)
    f = FORMATS[fmt]
    if f.quantize is not None:
        return quantize_weight(torch.randn(n, k, generator=g), fmt)
    w = torch.randint(0, 256, (n, f.row_bytes(k)), dtype=torch.uint8, generator=g)
    blocks = w.view(n, -1, f.block_bytes)
    for off in _F16_FIELDS[fmt]:
        scale = (torch.rand(*blocks.shape[:2], 1, generator=g) * 0.049 + 0.001).to(torch.float16)
        blocks[..., off:off + 2] = scale.view(torch.uint8)
    return w


def gguf_type(fmt):
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType[FORMATS[fmt].ggml_type]


def same_floats(got, want):
    """Bit for bit equal f32 arrays, NaN where the other has NaN (payloads may differ)."""
    got, want = np.ascontiguousarray(got, dtype=np.float32), np.ascontiguousarray(want, dtype=np.float32)
    if got.shape != want.shape:
        return False
    nan = np.isnan(want)
    return bool(np.array_equal(np.isnan(got), nan)
                and np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)))


def normalized_error(got, want):
    """max |got - want| / max |want|."""
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


# Kernels may quantize activations to 8 bits per block before integer dot products
# (llama.cpp's scheme, allowed by issue 16): about 1/254 of a block's largest |x| per
# element, which over K terms stays within 2% of the output's largest magnitude.
KERNEL_TOL = 2e-2
# AVX2 without VNNI runs int8 layers of 8 or more rows on dynamic activations with 7-bit
# codes (_C.qmatmul_act_max), so that its int8 GEMM's maddubs pairs of unsigned weight
# codes stay within int16: steps of 1/126 of a block's largest |x|, twice the 8-bit ones.
ACT_7BIT = _C.qmatmul_act_max("int8", 8) == 63


def has_7bit_layers(model):
    """Whether `model` has layers that run on 7-bit activation codes on this CPU (ACT_7BIT):
    int8 QLinear without a static scale."""
    from zenith.quant.modules import QLinear

    return ACT_7BIT and any(isinstance(m, QLinear) and m.format == "int8" and m.x_scale is None
                            for m in model.modules())


def assert_same_model_close(got, want, model=None):
    """Compiled against eager on the same quantized model. Both run the same kernels, but
    a last-bit difference upstream (Zenith's fused GELU or norm against torch's) can move
    an activation across an 8-bit rounding boundary, which changes a product by one
    quantization step: so not bit-equal, but within one matmul's KERNEL_TOL. Where the
    model's steps are twice as large (has_7bit_layers), such a change is too: 2.5x the
    bound (a 2-layer Gemma 3 measured 0.019 on 8-bit steps, 0.042 on 7-bit ones)."""
    err = normalized_error(got, want)
    tol = 2.5 * KERNEL_TOL if model is not None and has_7bit_layers(model) else KERNEL_TOL
    assert err <= tol, f"compiled vs eager: normalized error {err:.3g} > {tol}"


def assert_model_close(got, want, cos_min=0.99, err_max=0.25):
    """A whole quantized model against the same weights decoded to fp32. Each matmul stays
    within KERNEL_TOL (test_quant_kernels.py checks that bound per format), but through
    several random-init layers the per-layer errors compound (a 2-layer Llama with every
    block type: 0.5-1.6% per matmul, 5-15% at the logits), so the model-level check is the
    direction of the output (cosine) and a looser bound on its largest error."""
    cos = torch.nn.functional.cosine_similarity(got.flatten().double(), want.flatten().double(), dim=0).item()
    err = normalized_error(got, want)
    assert cos >= cos_min and err <= err_max, f"cosine {cos:.5f} (>= {cos_min}), normalized error {err:.3g} (<= {err_max})"
