"""Zenith: a graph compiler and C++ runtime for PyTorch.

    import zenith
    model = torch.compile(model, backend="zenith")   # or zenith.compile(model)
    model = zenith.freeze(model.eval())               # inference, weights bound once, no Dynamo
    zenith.export(model.eval(), (x,), "m.zenith")     # one file the C++ runtime runs without Python
    zenith.export_decoder(llm.eval(), "llm.zenith")   # a causal LM's decoding step, its KV cache in and out

C++ programs link the runtime from this package: CMake's find_package(zenith) with
-DCMAKE_PREFIX_PATH=$(python -c "import zenith; print(zenith.cmake_prefix_path)") (docs/cpp.md).
"""
from __future__ import annotations

import os as _os

from zenith import _C  # noqa: F401  (the native core; fails loudly if the build is missing)
from zenith import logs as _logs
from zenith.api import Report, compile, empty_cache, explain, reset_stats, stats  # noqa: A004
from zenith.backend import make_backend, zenith_backend
from zenith.decoder import export_decoder
from zenith.model_file import export, load
from zenith.freeze import freeze
from zenith.profiler import _enable_from_env, profile
from zenith.quant import load_gguf, load_quantized, quantize, save_quantized

__all__ = ["compile", "freeze", "explain", "stats", "reset_stats", "empty_cache", "profile", "Report", "make_backend",
           "zenith_backend", "quantize", "load_gguf", "save_quantized", "load_quantized", "export", "load", "export_decoder"]
__version__ = "0.1.0"
# The C++ package installed with this one (lib/libzenith.a, include/zenith/, lib/cmake/zenith/).
cmake_prefix_path = _os.path.dirname(_os.path.abspath(__file__))


def _register():
    # Registers "zenith" with Dynamo unless its entry point is about to (loading an
    # entry point registers the name itself and would see ours as a duplicate).
    from torch._dynamo.backends import registry

    if "zenith" in registry._COMPILER_FNS or registry._BACKENDS.get("zenith") is not None:
        return
    registry.register_backend(zenith_backend, name="zenith")


_register()
_logs.setup()
_enable_from_env()
