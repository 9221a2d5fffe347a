"""Constant weights of inference graphs: which segment inputs the runtime may keep
packed, and when a packed copy must go because the weight changed.

The static inputs (parameters and buffers: AOTAutograd's list, or the placeholders
Dynamo tagged) are marked constant in the segments that read them
(Executable.set_constant_inputs); a GEMM, conv2d or fused conv block then packs such
weights on its first call and keeps them. A copy goes stale when the weight changes in place (PyTorch
bumps its version counter: optimizer step, load_state_dict, any in-place op) or when
new memory lands where the old storage was, with an equal version (module.to(bfloat16)
.to(float32), `param.data = t`, checkpoints loaded twice with mmap=True, assign=True).

One compiled graph serves every instance of a model class (Dynamo reuses it; the
weights arrive as inputs), and every block of a model compiled block by block (regional
compilation). Each set of weight tensors seen (by id(), up to MAX_SETS) gets a weight
slot of its own in the runtime, which keeps one packed copy per node and slot: two models
called in turn each keep theirs, as does each block, and within a slot a weight at a new
address (`param.data = t`) replaces the copy, as with one model alone. A set past
MAX_SETS drops every copy and the slots are handed out afresh.

Per call the check is kept off the common path: while no segment holds a packed weight
(nn.Linear's weights are read in place, few-row GEMMs stream theirs) nothing can be
stale and only the weights' ids are read (to find their slot: ids, not data_ptr(), 3 us
against 30 for 148 weights); otherwise the version counters of the weights some node
reads packed (the executables' packable_inputs: MobileNet V2's 52 conv weights of its
262 parameters and buffers, whose reads cost 50-140 us a call with the caches cold
from the kernels) are compared with the set's record, and a flag set by weak-reference
callbacks says whether any storage recorded has since been freed (PyTorch keeps one Python object per live storage, so the
reference dies with the storage; new memory at a freed address must not meet the old
copy). A set not seen before is recorded after checking that the tensors it shares with
recorded sets carry the same versions. Versions and storages are recorded as of a full
check; a copy packed after it (or while nothing was held) is at least as new, so a
change since then drops copies (at worst one repack more than needed).

Inference tensors (a model built or loaded under torch.inference_mode) have no version
counter, yet can still change in place inside inference_mode: such weights are left
unmarked (re-marked when that changes), so they are packed afresh on every call and
never held.
"""
from __future__ import annotations

import functools
import operator
import weakref

from zenith import _C

_version_of = operator.attrgetter("_version")
_holds_packed = operator.attrgetter("holds_packed")


MAX_SETS = _C.WEIGHT_SLOTS  # the runtime's weight slots (Executable::kKeptPerNode)


class WeightWatch:
    def __init__(self, positions, segments):
        """positions: graph input positions of the static inputs (sorted).
        segments: (executable, [(segment input index, graph position), ...]) for each
        segment, listing its inputs that are static inputs read in place (no permute)."""
        self.positions = tuple(positions)
        self.segments = [(exe, list(pairs)) for exe, pairs in segments]
        self._exes = [exe for exe, _ in self.segments]
        # ids of the static inputs -> [weight slot, versions (None: an inference tensor),
        # the watched indices (_watched) and their recorded versions, cached by check]
        self._sets = {}
        self._seen = {}  # id -> version, over every recorded set
        self._alive = [True]  # cleared when a storage recorded since the last reset is freed
        self._refs = []  # weak references to those storages (their callbacks clear _alive)
        self._unversioned = ()  # static positions holding inference tensors at the last check
        self._watch_key = None  # the executables' packable generations _watch was made for
        self._watch = ()  # indices into positions of the versioned inputs some node reads packed
        self._mark(())

    def _mark(self, unversioned):
        """Tells each segment which inputs it may keep packed: the static ones, except those
        at graph positions in `unversioned`. Also forgets every packed copy."""
        for exe, pairs in self.segments:
            exe.set_constant_inputs([i for i, pos in pairs if pos not in unversioned])

    def _held(self):
        return any(map(_holds_packed, self._exes))  # lock-free in C++

    def _watched(self):
        """Indices into positions of the inputs whose versions decide staleness: those some
        segment reads packed (the others are read in place every call), versioned."""
        key = tuple(exe.packable_generation for exe in self._exes)
        if key != self._watch_key:
            packed = set()
            for exe, pairs in self.segments:
                packable = set(exe.packable_inputs)
                packed.update(pos for i, pos in pairs if i in packable)
            self._watch = tuple(j for j, pos in enumerate(self.positions)
                                if pos in packed and pos not in self._unversioned)
            self._watch_key = key
        return self._watch

    def _reset(self):
        """Forgets every record (after the packed copies went)."""
        self._sets, self._seen, self._refs = {}, {}, []
        self._alive = [True]  # a new flag: callbacks of the references dropped here cannot touch it

    def check(self, args):
        """Before a call: drops packed copies of weights that changed since the last check;
        returns the weight slot of this call's weights."""
        ws = [args[i] for i in self.positions]
        return self._check(ws, tuple(map(id, ws)))

    def pinned(self, ws):
        """check() for calls that always pass these weights (in positions' order; a frozen
        model's): a function of no arguments, with the list and its ids made once. Its
        caller (build_call) has checked that there is one for every position."""
        ws = list(ws)
        return functools.partial(self._check, ws, tuple(map(id, ws)))

    def _check(self, ws, ids):
        known = self._sets.get(ids)  # [slot, versions, watched indices, their recorded versions]
        if known is not None and not self._held():
            return known[0]
        if known is not None and self._alive[0]:  # the common path: the watched versions only
            watch = self._watched()
            if known[2] is not watch:
                known[2], known[3] = watch, tuple(known[1][j] for j in watch)
            try:
                if tuple(_version_of(ws[j]) for j in watch) == known[3]:
                    return known[0]
            except RuntimeError:  # an inference tensor: the full check below sorts it out
                pass
        # Inference tensors track no version counter: reading one raises, except on a
        # detached view made outside inference mode (zenith.freeze binds those), which
        # reads 0 for ever; so they are asked, not read.
        versions = tuple(None if w.is_inference() else w._version for w in ws)
        if known is not None and known[1] == versions and self._alive[0]:
            return known[0]
        unversioned = tuple(i for i, v in zip(self.positions, versions) if v is None)
        if unversioned != self._unversioned:  # also forgets every packed copy
            self._mark(unversioned)
            self._unversioned = unversioned
            self._watch_key = None
            self._reset()
        elif self._sets and (known is not None or not self._alive[0] or len(self._sets) >= MAX_SETS or
                             any(self._seen.get(i, v) != v for i, v in zip(ids, versions))):
            for exe in self._exes:  # a weight changed, or memory moved: repack on next use
                exe.drop_packed()
            self._reset()
        alive = self._alive

        def freed(_ref, alive=alive):
            alive[0] = False

        self._refs.extend(weakref.ref(w.untyped_storage(), freed) for w in ws)
        slot = len(self._sets)
        self._sets[ids] = [slot, versions, None, None]
        self._seen.update(zip(ids, versions))
        return slot
