"""Who competes: the frameworks a run may name, the model each PyTorch contestant
runs (eager, torch.compile with Inductor, Zenith), and whether a peer outside PyTorch
can run here (installed, and in scope for the workload)."""
from __future__ import annotations

import importlib.util

import torch

import zenith
from zenith.bench.runner import skipped


ALL_FRAMEWORKS = ("eager", "inductor", "zenith", "onnxruntime", "openvino", "llamacpp")
PEER_PACKAGES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "llamacpp": "llama_cpp"}
PEER_PIP = {"onnxruntime": "onnxruntime onnx onnxscript", "openvino": "openvino", "llamacpp": "llama-cpp-python"}
PEER_SCOPE = {"onnxruntime": "it runs the single-call inference workloads: bert-base, minilm, resnet50",
              "openvino": "it runs the single-call inference workloads: bert-base, minilm, resnet50",
              "llamacpp": "it runs GGUF models: gemma3-270m-decode"}


def peer_status(fw, supported=()):
    """None when `fw` can run here; else a 'skipped' result saying why."""
    if fw in PEER_PACKAGES and importlib.util.find_spec(PEER_PACKAGES[fw]) is None:
        return skipped(f"package '{PEER_PACKAGES[fw]}' is not installed (pip install {PEER_PIP[fw]})")
    if fw in PEER_PACKAGES and fw not in supported:
        return skipped(f"{fw} does not run this workload ({PEER_SCOPE[fw]})")
    return None


def compiled(fw, model, dynamic=None):
    if fw == "eager":
        return model
    if fw == "inductor":
        return torch.compile(model, dynamic=dynamic)
    if fw == "zenith":
        return zenith.compile(model, dynamic=dynamic)
    raise ValueError(fw)
