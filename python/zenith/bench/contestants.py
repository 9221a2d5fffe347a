"""Who competes: the frameworks a run may name, the model each PyTorch contestant
runs (eager, torch.compile with Inductor, Zenith through torch.compile or
zenith.freeze), and whether a peer outside PyTorch
can run here (installed, and in scope for the workload)."""
from __future__ import annotations

import copy
import importlib.util

import torch

import zenith
from zenith.bench.runner import say, skipped


# --quant schemes that are another scheme with zenith.quantize options: name -> (scheme, options).
# int8-dynamic-w7: 7-bit linear weights (AVX2's int8 GEMM sums two steps in 16 bits; more error).
# int4-g64 / int4-g128: int4 with one scale per 64 / 128 values (fewer bytes than the
# default 32's, more error).
SCHEME_OPTIONS = {"int8-dynamic-w7": ("int8-dynamic", {"linear_weight_bits": 7}),
                  "int4-g64": ("int4", {"group_size": 64}), "int4-g128": ("int4", {"group_size": 128})}


def base_scheme(name):
    """The zenith.quantize scheme a --quant name runs (SCHEME_OPTIONS)."""
    return SCHEME_OPTIONS.get(name, (name, {}))[0]


def quantize(model, scheme, **options):
    """zenith.quantize(model, ...) for a --quant scheme name (SCHEME_OPTIONS)."""
    scheme, extra = SCHEME_OPTIONS.get(scheme, (scheme, {}))
    return zenith.quantize(model, scheme, **extra, **options)


ALL_FRAMEWORKS = ("eager", "inductor", "zenith", "zenith-frozen", "zenith-file", "onnxruntime", "openvino", "llamacpp")
# nncf: OpenVINO's INT8 (openvino:int8-static) quantizes with it.
PEER_PACKAGES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "llamacpp": "llama_cpp", "nncf": "nncf"}
PEER_PIP = {"onnxruntime": "onnxruntime onnx onnxscript", "openvino": "openvino", "llamacpp": "llama-cpp-python",
            "nncf": "nncf"}
PEER_SCOPE = {"onnxruntime": "it runs the single-call inference workloads: bert-base, minilm, resnet50",
              "openvino": "it runs the single-call inference workloads: bert-base, minilm, resnet50",
              "llamacpp": "it runs GGUF models: gemma3-270m-decode",
              "zenith-frozen": "zenith.freeze runs the single-call inference workloads: bert-base, minilm, "
                               "resnet50, mobilenet-v2, small-mlp",
              "zenith-file": "zenith.export_decoder's file runs GGUF models: gemma3-270m-decode"}


def peer_status(fw, supported=()):
    """None when `fw` can run here; else a 'skipped' result saying why."""
    if fw in PEER_PACKAGES and importlib.util.find_spec(PEER_PACKAGES[fw]) is None:
        return skipped(f"package '{PEER_PACKAGES[fw]}' is not installed (pip install {PEER_PIP[fw]})")
    if fw in PEER_SCOPE and fw not in supported:
        return skipped(f"{fw} does not run this workload ({PEER_SCOPE[fw]})")
    return None


def compiled(fw, model, dynamic=None):
    if fw == "eager":
        return model
    if fw == "inductor":
        return torch.compile(model, dynamic=dynamic)
    if fw == "zenith":
        return zenith.compile(model, dynamic=dynamic)
    if fw == "zenith-frozen":  # the weights bound once, no Dynamo per call (zenith/freeze.py)
        return zenith.freeze(model)
    raise ValueError(fw)


STATIC_DEFAULT = {"method": "percentile", "percentile": 99.99}


def static_label(options):
    """How int8-static calibrates, for the report: 'percentile 99.99', 'minmax, smooth 0.85'."""
    o = dict(STATIC_DEFAULT, **(options or {}))
    text = o["method"] + (f" {o['percentile']:g}" if o["method"] == "percentile" else "")
    return text + (f", smooth {o['smooth']:g}" if o.get("smooth") is not None else "")


def quant_variants(cfg, base, gguf=None, calibration=None, static_options=None):
    """The Zenith contestants of `--quant`: 'zenith' for fp32, 'zenith:<scheme>' for
    each other scheme, as (names, variants): variants[name]() builds that contestant's
    model (a quantized copy of `base`, or for 'gguf' the file's own blocks; int8-static
    calibrated on `calibration`, a list of input tuples, with zenith.quantize's options
    `static_options` (default percentile 99.99))."""
    names, variants = [], {}
    for scheme in cfg.quant:
        if scheme == "fp32":
            names.append("zenith")
            continue
        fw = f"zenith:{scheme}"
        names.append(fw)
        if scheme == "gguf":
            if not gguf:
                say(cfg, "--quant gguf: this workload has no GGUF file (a random-init config); no zenith:gguf")
                names.pop()
                continue
            variants[fw] = lambda: zenith.load_gguf(gguf)[0].eval()
        elif scheme == "int8-static":
            if calibration is None:
                say(cfg, "--quant int8-static: this workload has no calibration batches; no zenith:int8-static")
                names.pop()
                continue
            options = dict(STATIC_DEFAULT, **(static_options or {}))
            variants[fw] = lambda: zenith.quantize(copy.deepcopy(base), "int8-static", calibration=calibration,
                                                   **options).eval()
        else:
            variants[fw] = lambda scheme=scheme: quantize(copy.deepcopy(base), scheme).eval()
    return names, variants
