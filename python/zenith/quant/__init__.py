"""Quantized inference: weight formats, the custom ops, QLinear / QConv2d / QEmbedding,
zenith.quantize (weight-only, or INT8 activations too, calibrated or dynamic),
zenith.save_quantized / load_quantized (one safetensors file, no pickled code) and
zenith.load_gguf (GGUF files; needs the `gguf` package: the `quant` extra)."""
from zenith.quant.formats import FORMATS, dequantize, quantize_weight
from zenith.quant.gguf import load_gguf  # imports gguf and transformers only when called
from zenith.quant.modules import QConv2d, QEmbedding, QLinear
from zenith.quant.quantize import SCHEMES, quantize, summary
from zenith.quant.serialize import load_quantized, save_quantized  # imports safetensors only when called


__all__ = ["FORMATS", "SCHEMES", "QConv2d", "QEmbedding", "QLinear", "dequantize", "load_gguf", "load_quantized",
           "quantize", "quantize_weight", "save_quantized", "summary"]
