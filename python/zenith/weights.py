"""Constant weights of inference graphs: which segment inputs the runtime may keep
packed, and when a packed copy must go because the weight changed.

The static inputs (parameters and buffers: AOTAutograd's list, or the placeholders
Dynamo tagged) are marked constant in the segments that read them
(Executable.set_constant_inputs); a GEMM or conv2d then packs such a weight on its
first call and keeps it. A copy goes stale when the weight changes in place (PyTorch
bumps its version counter: optimizer step, load_state_dict, any in-place op) or when
new memory lands where the old storage was, with an equal version (module.to(bfloat16)
.to(float32), `param.data = t`, checkpoints loaded twice with mmap=True, assign=True).

Per call the check is kept off the common path: while no segment holds a packed
weight (nn.Linear's weights are read in place, few-row GEMMs stream theirs) nothing
can be stale and nothing is read; otherwise one tuple of version counters is compared
with the last one, and a flag set by weak-reference callbacks says whether any of the
storages seen then has since been freed (PyTorch keeps one Python object per live
storage, so the reference dies with the storage). The versions and storages are
recorded as of the last full check; a copy packed after it is at least as new, so a
change anywhere since then drops copies (at worst one repack more than needed).

Inference tensors (a model built or loaded under torch.inference_mode) have no version
counter, yet can still change in place inside inference_mode: such weights are left
unmarked (re-marked when that changes), so they are packed afresh on every call and
never held.
"""
from __future__ import annotations

import operator
import weakref

_version_of = operator.attrgetter("_version")
_holds_packed = operator.attrgetter("holds_packed")


class WeightWatch:
    def __init__(self, positions, segments):
        """positions: graph input positions of the static inputs (sorted).
        segments: (executable, [(segment input index, graph position), ...]) for each
        segment, listing its inputs that are static inputs read in place (no permute)."""
        self.positions = tuple(positions)
        self.segments = [(exe, list(pairs)) for exe, pairs in segments]
        self._exes = [exe for exe, _ in self.segments]
        self._versions = None  # per static position: its _version, None for an inference tensor
        self._alive = [True]  # cleared when a storage recorded at the last full check is freed
        self._refs = ()  # weak references to those storages (their callbacks clear _alive)
        self._unversioned = ()  # static positions holding inference tensors at the last check
        self._mark(())

    def _mark(self, unversioned):
        """Tells each segment which inputs it may keep packed: the static ones, except those
        at graph positions in `unversioned`. Also forgets every packed copy."""
        for exe, pairs in self.segments:
            exe.set_constant_inputs([i for i, pos in pairs if pos not in unversioned])

    def _held(self):
        return any(map(_holds_packed, self._exes))  # lock-free in C++

    def check(self, args):
        """Before a call: drops packed copies of weights that changed since the last check."""
        if self._versions is not None and not self._held():
            return
        ws = [args[i] for i in self.positions]
        try:
            versions = tuple(map(_version_of, ws))
        except RuntimeError:  # inference tensors do not track a version counter
            versions = tuple(None if w.is_inference() else w._version for w in ws)
        if versions == self._versions and self._alive[0]:
            return
        unversioned = tuple(i for i, v in zip(self.positions, versions) if v is None)
        if unversioned != self._unversioned:  # also forgets every packed copy
            self._mark(unversioned)
            self._unversioned = unversioned
        elif self._versions is not None:  # a weight changed: repack on next use
            for exe in self._exes:
                exe.drop_packed()
        alive = [True]  # a new flag: callbacks of the references dropped below cannot touch it

        def freed(_ref, alive=alive):
            alive[0] = False

        self._refs = [weakref.ref(w.untyped_storage(), freed) for w in ws]
        self._alive = alive
        self._versions = versions
