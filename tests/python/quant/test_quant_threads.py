"""Concurrent calls into quantized compiled models: Python threads calling one compiled
model at once must each get the answer that model gives the same input called alone,
bit for bit (the quantized kernels' scratch is per thread; packed int8 weights, the int8
conv chain's codes and the segment's arenas are shared or pooled)."""
import threading

import pytest
import torch

import zenith
from zenith import backend

transformers = pytest.importorskip("transformers")
torchvision = pytest.importorskip("torchvision")


def _hammer(c, inputs, calls, threads_n=4, key=lambda o: o):
    with torch.no_grad():
        want = [key(c(x)).clone() for x in inputs]
    errors = []

    def worker(k):
        try:
            with torch.no_grad():
                for it in range(calls):
                    j = (k + it) % len(inputs)
                    got = key(c(inputs[j]))
                    if not torch.equal(got, want[j]):
                        errors.append((k, it, j, (got - want[j]).abs().max().item()))
        except Exception as e:  # pragma: no cover - surfaced below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors[:5]


def _native(sink):
    """The quantized custom ops ran inside Zenith's segments, none fell back."""
    assert sink and any(r.nodes_native for r in sink), "nothing compiled by Zenith"
    assert not [k for r in sink for k in r.fallback_ops if "zenith.q" in k]
    assert any(op in r.zenith_ops for r in sink for op in ("qmatmul", "conv2d", "conv2d_nchwc"))


def test_int8_static_cnn_from_threads():
    """Static INT8 ResNet-18: int8 convs passing codes between them, at two batch sizes."""
    m = torchvision.models.resnet18(num_classes=10).eval()
    zenith.quantize(m, "int8-static", calibration=[torch.randn(2, 3, 48, 48) for _ in range(3)])
    c = torch.compile(m, backend="zenith")
    with backend.collect_reports() as sink:
        _hammer(c, [torch.randn(1, 3, 48, 48), torch.randn(3, 3, 48, 48)], 12)
    _native(sink)


@pytest.mark.parametrize("scheme, kw", [("int8-dynamic", {}), ("int4", {}), ("nf4", {})])
def test_quantized_decoder_from_threads(scheme, kw):
    """A small Llama: one-token (decode kernels) and 7-token (GEMM) calls interleaved."""
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=500)
    m = transformers.LlamaForCausalLM(cfg).eval()
    zenith.quantize(m, scheme, **kw)
    c = torch.compile(m, backend="zenith")
    with backend.collect_reports() as sink:
        _hammer(c, [torch.randint(0, 500, (1, 1)), torch.randint(0, 500, (1, 7))], 20, key=lambda o: o.logits)
    _native(sink)
    assert any("qmatmul" in r.zenith_ops for r in sink)
