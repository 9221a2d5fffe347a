"""Quantized inference: weight formats, the custom ops, QLinear / QEmbedding,
zenith.quantize and zenith.load_gguf (GGUF files; needs the `gguf` package: the `quant`
extra)."""
from zenith.quant.formats import FORMATS, dequantize, quantize_weight
from zenith.quant.gguf import load_gguf  # imports gguf and transformers only when called
from zenith.quant.modules import QEmbedding, QLinear
from zenith.quant.quantize import SCHEMES, quantize, summary


__all__ = ["FORMATS", "SCHEMES", "QEmbedding", "QLinear", "dequantize", "load_gguf", "quantize", "quantize_weight",
           "summary"]
