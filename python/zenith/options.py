"""Zenith's compile options and torch.compile modes: the one table that
``zenith.compile(model, **options)``, ``torch.compile(model, backend="zenith",
options=..., mode=...)``, ``zenith.make_backend`` and ``zenith.explain`` read.

An unknown option is a ``TypeError`` naming the known ones (as an unexpected keyword
argument would be); a value of the wrong type is a ``TypeError`` naming the option;
an unknown mode is a ``ValueError`` naming the known modes. Under ``torch.compile``
the backend is first called at the model's first call, so that is where Dynamo
reports these (as ``BackendCompilerFailed`` wrapping the error); ``zenith.compile``
checks them at once.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Options:
    """Resolved options (hashable: one backend callable per distinct set)."""

    passes: bool = field(default=True, metadata={"doc": "run the IR pass pipeline (fusions, folding, CSE)"})
    verify: bool = field(default=False, metadata={"doc": "verify the IR after every pass"})
    fallback: bool = field(default=True, metadata={
        "doc": "let ops Zenith cannot run execute in PyTorch; False raises instead"})
    pack_weights: bool = field(default=True, metadata={
        "doc": "at inference, keep conv filters and row-major matmul weights (GPT-2's Conv1D) packed for the "
               "GEMM after their first call instead of packing them on every call; costs one extra copy of "
               "those weights in memory (nn.Linear weights are read in place and never copied)"})
    aot_inference: bool = field(default=False, metadata={
        "doc": "lower inference graphs through AOTAutograd rather than tracing them to ATen directly "
               "(slower to compile)"})

    def compiler_options(self):
        """The dict partition.CompiledGraph reads (aot_inference is the backend's own)."""
        return {"passes": self.passes, "verify": self.verify, "fallback": self.fallback,
                "pack_weights": self.pack_weights}


OPTIONS = tuple(f.name for f in dataclasses.fields(Options))
OPTION_DOCS = {f.name: f.metadata["doc"] for f in dataclasses.fields(Options)}
# The declared type of each option (annotations are strings here); bool is not an int.
_TYPES = {"bool": (bool, "a bool (True or False)"), "int": (int, "an int"), "str": (str, "a string")}
OPTION_TYPES = {f.name: _TYPES[f.type] for f in dataclasses.fields(Options)}

# torch.compile's modes (its docstring's four; torch passes mode= to a custom backend
# unless it is "default"): name -> (the options it implies for Zenith, what it means).
# In Inductor they differ by CUDA graphs and by autotuning GEMM templates; Zenith has
# neither (CPU only; kernels chosen from shapes and the CPU at run time, no search), so
# today every mode compiles as the default does.
_MODE_TABLE = {
    "default": ({}, "the defaults above"),
    "reduce-overhead": ({}, "as default (Inductor: CUDA graphs; Zenith has no CUDA backend)"),
    "max-autotune": ({}, "as default (Inductor: autotuned GEMM templates; Zenith does not autotune)"),
    "max-autotune-no-cudagraphs": ({}, "as default"),
}
MODES = {m: settings for m, (settings, _) in _MODE_TABLE.items()}
MODE_DOCS = {m: doc for m, (_, doc) in _MODE_TABLE.items()}


def resolve(mode=None, options=None, *, base=None, where="zenith"):
    """Options from `base` (default: the defaults), then `mode`'s settings, then the
    explicit `options` dict, each checked."""
    resolved = base or Options()
    if mode is not None:
        if not isinstance(mode, str):
            raise TypeError(f"{where}: mode must be a string, got {type(mode).__name__}")
        if mode not in MODES:
            raise ValueError(f"{where}: unknown mode {mode!r}; known modes: {', '.join(MODES)}")
        resolved = dataclasses.replace(resolved, **MODES[mode])
    if options is None:
        return resolved
    if not isinstance(options, dict):
        raise TypeError(f"{where}: options must be a dict of option name to value, got {type(options).__name__}")
    unknown = sorted(str(k) for k in options if k not in OPTIONS)
    if unknown:
        raise TypeError(f"{where}: unknown option(s) {', '.join(unknown)}; known options: {', '.join(OPTIONS)}")
    for k, v in options.items():
        cls, what = OPTION_TYPES[k]
        if not isinstance(v, cls) or (cls is int and isinstance(v, bool)):
            raise TypeError(f"{where}: option {k!r} must be {what}, got {type(v).__name__} {v!r}")
    return dataclasses.replace(resolved, **options)


def help_text(indent="    "):
    """The options and modes, one line each, from the tables above."""
    lines = [f"{k}={getattr(Options(), k)}: {d}" for k, d in OPTION_DOCS.items()]
    lines += [f"mode={m!r}: {d}" for m, d in MODE_DOCS.items()]
    return "".join(f"{indent}{line}\n" for line in lines)
