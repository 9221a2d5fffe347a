"""Peer contestants outside PyTorch: ONNX Runtime, OpenVINO, llama.cpp.

Each builder returns a zero-argument callable whose first call does the whole cold
start (export or conversion, session creation, first run), so run_interleaved times
it the same way as torch.compile's first call. Outputs come back as torch tensors so
they are checked against eager like every other contestant. Thread counts are set
explicitly to the run's --threads; precision is pinned to fp32 where the peer would
otherwise pick bf16 on CPUs that have it (OpenVINO does on AMX/AVX512-BF16)."""
from __future__ import annotations

import contextlib
import os
import tempfile

import torch


SETTINGS = {
    "onnxruntime": "torch.onnx.export (dynamo, optimize) -> CPUExecutionProvider, ORT_ENABLE_ALL, "
                   "intra_op_num_threads={t}, inter_op 1, pool spinning on (its default)",
    "onnxruntime:int8-dynamic": "torch.onnx.export (dynamo, optimize) -> quant_pre_process -> "
                                "onnxruntime.quantization.quantize_dynamic "
                                "(QInt8 weights per channel, activations quantized per tensor at run time) -> "
                                "CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads={t}, inter_op 1, pool spinning on (its default)",
    "onnxruntime:int8-static": "torch.onnx.export (dynamo, optimize) -> quant_pre_process -> "
                               "onnxruntime.quantization.quantize_static (QDQ, QInt8 weights per channel, QUInt8 "
                               "activations, percentile calibration on Zenith's calibration batches) -> "
                               "CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads={t}, inter_op 1, pool spinning on (its default)",
    "openvino": "openvino.convert_model -> CPU, LATENCY hint, INFERENCE_NUM_THREADS={t}, precision f32",
    "openvino:int8-static": "openvino.convert_model -> nncf.quantize (post-training INT8 on Zenith's calibration "
                            "batches, subset_size = all of them; model_type TRANSFORMER for the encoders, which "
                            "brings SmoothQuant and the mixed preset; otherwise its defaults: performance preset, "
                            "fast bias correction) -> CPU, LATENCY hint, INFERENCE_NUM_THREADS={t}, precision f32",
    "llamacpp": "llama-cpp-python on the GGUF file, n_threads={t}, greedy (top_k=1, temp 0)",
}


def _built_on_first_call(build):
    """A callable whose first call runs build() (the peer's whole cold start) and keeps
    the run function it returns; every call returns that function's output."""
    state = {}

    def fn():
        if "run" not in state:
            state["run"] = build()
        return state["run"]()

    return fn


@contextlib.contextmanager
def _histograms_in_chunks(chunk=8):
    """ONNX Runtime's histogram calibrators (percentile, entropy) keep every tensor of every
    calibration batch before building one histogram: BERT-base's 100 batches of 128
    tokens came to over 24 GB and the kernel killed the run. Its histogram collector
    merges across calls, so here collect_data takes the batches `chunk` at a time. Not
    the same histogram as one call over everything: for uint8 (asymmetric) percentile,
    later chunks keep the first chunk's bin width and add bins up to a new extreme, so
    thresholds can move by about a bin. Only for the duration of one quantize_static."""
    from onnxruntime.quantization.calibrate import CalibrationDataReader, HistogramCalibrater

    whole = HistogramCalibrater.collect_data

    class Some(CalibrationDataReader):
        def __init__(self, items):
            self.it = iter(items)

        def get_next(self):
            return next(self.it, None)

    def in_chunks(self, reader):
        while True:
            items = [b for b in (reader.get_next() for _ in range(chunk)) if b]
            if not items:
                return
            whole(self, Some(items))

    HistogramCalibrater.collect_data = in_chunks
    try:
        yield
    finally:
        HistogramCalibrater.collect_data = whole


def onnxruntime_fn(model, inputs, threads, quantize=None, calibration=None, percentile=99.99):
    """torch.onnx.export (the dynamo exporter, optimized) of the same eager model;
    ONNX Runtime CPU provider with all graph optimizations. quantize="int8-dynamic":
    the exported model through onnxruntime.quantization.quantize_dynamic first;
    "int8-static": quantize_static (QDQ, int8 weights per channel, uint8 activations, its
    percentile calibration at `percentile` over `calibration`, a list of input tuples:
    the batches Zenith calibrates on)."""
    if quantize not in (None, "int8-dynamic", "int8-static"):
        raise ValueError(f"onnxruntime: no quantized variant {quantize!r} (int8-dynamic, int8-static)")
    if quantize == "int8-static" and not calibration:
        raise ValueError("onnxruntime int8-static needs calibration batches")

    def build():
        import onnxruntime as ort

        # The exported files are only needed until the session has read them; every bench
        # run used to leave 0.4-0.9 GB behind in the temp directory (91 runs filled a disk).
        with tempfile.TemporaryDirectory(prefix="zenith-bench-onnx-") as tmp:
            path = os.path.join(tmp, "model.onnx")
            with torch.no_grad():
                torch.onnx.export(model, tuple(inputs), path, input_names=[f"input_{i}" for i in range(len(inputs))],
                                  dynamo=True, optimize=True, verbose=False)
            if quantize:  # ONNX Runtime's pre-processing first (shape inference, folding), as its docs ask
                from onnxruntime.quantization.shape_inference import quant_pre_process

                pre = path.replace(".onnx", ".pre.onnx")
                quant_pre_process(path, pre)
            if quantize == "int8-dynamic":
                from onnxruntime.quantization import QuantType, quantize_dynamic

                qpath = path.replace(".onnx", ".int8.onnx")
                quantize_dynamic(pre, qpath, weight_type=QuantType.QInt8, per_channel=True)
                path = qpath
            elif quantize == "int8-static":
                from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                                      quantize_static)

                names = [f"input_{i}" for i in range(len(inputs))]

                class Reader(CalibrationDataReader):
                    def __init__(self):
                        self.it = iter(calibration)

                    def get_next(self):
                        b = next(self.it, None)
                        return None if b is None else {n: x.detach().numpy() for n, x in zip(names, b)}

                qpath = path.replace(".onnx", ".int8s.onnx")
                with _histograms_in_chunks():
                    quantize_static(pre, qpath, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                                    calibrate_method=CalibrationMethod.Percentile,
                                    extra_options={"CalibPercentile": percentile})
                path = qpath
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # ORT's pool spins after each run by default, as Zenith's and OpenVINO's do; the
            # runner waits for every contestant's threads to go quiet before timing the next
            # (stats.settle), so the default stands: with it off, ResNet-50 batch 1 took 1.04x
            # the time (spinning / off 0.960 [0.954, 0.965], paired, every call after the
            # quiet; Zen 5, 2026-12-04).
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed = {i.name: x.detach().numpy() for i, x in zip(sess.get_inputs(), inputs)}  # once, not per call
        return lambda: torch.from_numpy(sess.run(None, feed)[0])

    return _built_on_first_call(build)


def openvino_fn(model, inputs, threads, quantize=None, calibration=None, transformer=False):
    """openvino.convert_model of the same eager model, compiled for CPU with the
    latency hint, `threads` inference threads and f32 inference precision.
    quantize="int8-static": the converted model through NNCF's post-training INT8
    (nncf.quantize) first, calibrated on `calibration` (a list of input tuples: the
    batches Zenith calibrates on), with model_type TRANSFORMER where `transformer` (as
    NNCF asks for transformer models); OpenVINO then runs its int8 kernels on the
    quantize / dequantize pairs NNCF inserted."""
    if quantize not in (None, "int8-static"):
        raise ValueError(f"openvino: no quantized variant {quantize!r} (int8-static, by NNCF)")
    if quantize and not calibration:
        raise ValueError("openvino int8-static needs calibration batches")

    def build():
        import openvino as ov

        with torch.no_grad():
            om = ov.convert_model(model, example_input=tuple(inputs))
        if quantize:
            import nncf

            data = nncf.Dataset(calibration, lambda b: [x.detach().numpy() for x in b])
            om = nncf.quantize(om, data, subset_size=len(calibration),
                               model_type=nncf.ModelType.TRANSFORMER if transformer else None)
        cm = ov.compile_model(om, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                                          "PERFORMANCE_HINT": "LATENCY"})
        req = cm.create_infer_request()
        feed = [x.detach().numpy() for x in inputs]
        return lambda: torch.from_numpy(req.infer(feed)[0].copy())

    return _built_on_first_call(build)


def llamacpp_generate_fn(gguf_path, prompt_ids, new_tokens, threads):
    """llama-cpp-python on the GGUF file itself (its own quantized kernels), greedy
    decoding of `new_tokens` tokens after the same prompt token ids. Returns the
    prompt followed by the generated ids, as a [1, T] tensor like HF generate."""
    state = {}

    def build():
        from llama_cpp import Llama

        state["llm"] = Llama(model_path=str(gguf_path), n_threads=threads, n_threads_batch=threads,
                             n_ctx=max(256, len(prompt_ids) + new_tokens + 8), n_batch=512, verbose=False,
                             seed=0)

    def fn(n=new_tokens):
        if "llm" not in state:
            build()
        llm = state["llm"]
        llm.reset()
        out = list(prompt_ids)
        for i, tok in enumerate(llm.generate(list(prompt_ids), top_k=1, top_p=1.0, min_p=0.0, temp=0.0,
                                             repeat_penalty=1.0, reset=True)):
            out.append(int(tok))
            if i + 1 >= n:
                break
        return torch.tensor([out])

    return fn


def llamacpp_logits_fn(gguf_path, n_ctx, threads):
    """llama-cpp-python on the GGUF file: fn(ids [T]) -> logits [T, vocab] of one
    window evaluated from an empty cache (for perplexity)."""
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf_path), n_threads=threads, n_threads_batch=threads, n_ctx=n_ctx,
                n_batch=n_ctx, logits_all=True, verbose=False, seed=0)

    def fn(ids):
        llm.reset()
        llm.eval([int(i) for i in ids])
        return torch.from_numpy(np.array(llm.scores[: len(ids)], dtype=np.float32))

    return fn
