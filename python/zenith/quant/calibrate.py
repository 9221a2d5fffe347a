"""Calibration for static INT8: the inputs of a model's layers observed over a user's
samples, and one activation scale per layer from them.

An Observer keeps a histogram of |x| (2048 bins over [0, range), the range doubled, two
bins merged into one, whenever a larger value arrives: exact re-binning, one pass over
the data) and the largest finite |x|. Scales (the int8 codes are symmetric, [-127, 127]):
  minmax      max |x| / 127
  percentile  the given percentile of |x| (default 99.99) / 127: a few outliers clipped
  entropy     the clipping threshold whose 128-level quantized histogram is closest to the
              observed one in KL divergence (TensorRT's calibration; exact zeros left
              out, and bins merged while they hold under 16 values each), / 127
"""
from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Mapping
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from zenith import _C
from zenith.quant.ops import sync_threads

METHODS = ("minmax", "percentile", "entropy")
BINS = 2048
LEVELS = 128  # the positive half of int8's codes, as the entropy search compares them


class Observer:
    """The distribution of |x| over every tensor given to add(); with channels=True also
    the largest finite |x| of each channel (the last dimension: SmoothQuant's statistics)."""

    def __init__(self, channels=False):
        self.channel_amax = None if not channels else torch.zeros(0)
        self.counts = torch.zeros(BINS, dtype=torch.float64)
        self.range = 0.0  # the histogram covers [0, range)
        self.amax = 0.0
        self.zeros = 0  # exact zeros (ReLU outputs): any scale codes them exactly, so the
        # entropy search leaves them out (a spike at 0 would pull its threshold down)
        self.nonfinite = 0

    def add(self, x):
        # Two passes in C++ (statistics, then the histogram once the range covers the
        # largest value), threaded: calibration calls this for every layer and batch.
        a = x.detach().to(torch.float32).contiguous()
        sync_threads()
        m, zeros, nonfinite = _C.abs_stats(a)
        if self.channel_amax is not None and a.dim() > 0 and a.numel() > 0:
            c = a.abs().reshape(-1, a.shape[-1])
            if nonfinite:  # rare: a 4x slower masked pass
                c = torch.where(torch.isfinite(c), c, torch.zeros((), dtype=c.dtype))
            c = c.amax(0)
            self.channel_amax = c if self.channel_amax.numel() == 0 else torch.maximum(self.channel_amax, c)
        self.nonfinite += nonfinite
        self.zeros += zeros
        if m == 0.0:
            return
        self.amax = max(self.amax, m)
        if self.range == 0.0:
            self.range = 2.0 ** math.ceil(math.log2(m) + 1e-9)
        while m >= self.range:  # double the range: bins 2i and 2i + 1 become bin i
            self.counts = torch.cat([self.counts.view(-1, 2).sum(1), torch.zeros(BINS // 2, dtype=torch.float64)])
            self.range *= 2.0
        self.counts += _C.abs_histogram(a, self.range, BINS).double()

    @property
    def total(self):
        """Finite values seen."""
        return float(self.counts.sum()) + self.zeros

    def threshold(self, method, percentile=99.99):
        """The clipping threshold of |x| the method chooses (0 if nothing was seen)."""
        if self.amax == 0.0:
            return 0.0
        if method == "minmax":
            return self.amax
        width = self.range / BINS
        if method == "percentile":
            cum = torch.cumsum(self.counts, 0) + self.zeros
            i = int(torch.searchsorted(cum, cum[-1] * (percentile / 100.0)))
            return min(self.amax, (min(i, BINS - 1) + 1) * width)
        if method == "entropy":
            # Few samples leave most of 2048 bins empty, and the KL search then favours
            # thresholds that clip: bins merged until there are 16 values per bin (or 512 bins).
            counts = self.counts
            while counts.numel() > 4 * LEVELS and float(counts.sum()) < 16 * counts.numel():
                counts = counts.view(-1, 2).sum(1)
            return min(self.amax, (_best_kl_bins(counts) + 0.5) * (self.range / counts.numel()))
        raise ValueError(f"unknown calibration method {method!r}; methods: {', '.join(METHODS)}")

    def scale(self, method, percentile=99.99):
        return scale_of(self.threshold(method, percentile))


def scale_of(threshold):
    """The int8 activation scale that codes [-threshold, threshold] (1 where nothing nonzero was seen)."""
    return threshold / 127.0 if threshold > 0 else 1.0


def _best_kl_bins(counts):
    """The number of histogram bins to keep (the rest clipped into the last one) whose
    distribution, re-quantized into LEVELS levels, loses the least information (KL)."""
    last = int(torch.nonzero(counts).max()) + 1
    if last <= LEVELS:
        return last
    best, best_kl = last, float("inf")
    for i in range(LEVELS, last + 1, max(1, (last - LEVELS) // 256)):
        p = counts[:i].clone()
        p[i - 1] += counts[i:].sum()
        # Q: the first i bins merged into LEVELS levels, each level's mass spread evenly
        # over the bins of it that were not empty.
        edges = torch.linspace(0, i, LEVELS + 1).long()
        level = torch.bucketize(torch.arange(i), edges[1:], right=True).clamp_(max=LEVELS - 1)
        nonzero = (counts[:i] > 0).double()
        mass = torch.zeros(LEVELS, dtype=torch.float64).index_add_(0, level, counts[:i])
        nz = torch.zeros(LEVELS, dtype=torch.float64).index_add_(0, level, nonzero)
        q = torch.where(nonzero > 0, mass[level] / nz[level].clamp(min=1), torch.zeros_like(p))
        p, q = p / p.sum(), q / q.sum().clamp(min=1e-300)
        keep = p > 0
        kl = float((p[keep] * torch.log(p[keep] / q[keep].clamp(min=1e-12))).sum())
        if kl < best_kl:
            best, best_kl = i, kl
    return best


def _zenith_linear(module, input):  # nn.Linear.forward's signature: callers may pass input=
    x, w, b = input, module.weight, module.bias
    if (x.dtype != torch.float32 or x.device.type != "cpu" or torch.is_grad_enabled() or torch.is_autocast_enabled("cpu")
            or x.dim() == 0 or x.shape[-1] != w.shape[1] or x.numel() == 0):
        return F.linear(x, w, b)  # what this path does not cover (and the shape errors) as nn.Linear does
    y = _C.linear(x.reshape(-1, w.shape[1]).contiguous(), w.detach().contiguous(),
                  None if b is None else b.detach().contiguous())
    return y.reshape(*x.shape[:-1], w.shape[0])


@contextmanager
def zenith_linears(model):
    """Within it, the model's float32 nn.Linear layers (not subclasses, nor a layer whose
    forward is already replaced on the instance) compute with Zenith's SGEMM, forward hooks
    still run: calibration's forward passes are eager, and their time is mostly these
    layers' (BERT-base shapes, Zen 4: torch's linear 88-115 GFLOP/s, Zenith's 120-150).
    Autograd, autocast, other dtypes and devices go to torch as before. A copy of the model
    made inside the context keeps the replaced forwards; calibration makes none."""
    sync_threads()
    patched = []
    try:
        for m in model.modules():
            if (type(m) is nn.Linear and "forward" not in m.__dict__ and m.weight.dtype == torch.float32
                    and m.weight.device.type == "cpu" and (m.bias is None or m.bias.dtype == torch.float32)):
                fn = functools.partial(_zenith_linear, m)
                m.forward = fn
                patched.append((m, fn))
        yield
    finally:
        for m, fn in patched:
            if m.__dict__.get("forward") is fn:  # only ours: something set since stays
                del m.__dict__["forward"]


def run_model(model, batch):
    """model(batch): a tuple or list as positional arguments, a mapping as keywords."""
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


class TensorLabels:
    """A label per live tensor object, without keeping it alive: one and the same object
    gets one label, any other object (one reusing a freed tensor's id included) a new one."""

    def __init__(self):
        self._seen = {}  # id(tensor) -> (weak reference to it, label)
        self._next = 0

    def __call__(self, t):
        ref, label = self._seen.get(id(t), (None, None))
        if ref is None or ref() is not t:
            label, self._next = self._next, self._next + 1
            self._seen[id(t)] = (weakref.ref(t), label)
        return label


def observe(model, modules, samples, channels=(), multipliers=None, first_inputs=None):
    """Runs `model` on every batch of `samples` with each of `modules` ({name: module})
    observing its first input (times multipliers[name], where given; per channel too for
    the names in `channels`). first_inputs (a dict): for the names in `channels`, a label
    of the tensor each module's first call got: modules given one and the same tensor
    object (a transformer's Q, K and V) get one label. No tensor is kept for it (a label
    per live object, by id and a weak reference: a freed tensor's id reused by another
    gets a new label). Returns ({name: Observer}, batches run)."""
    multipliers = multipliers or {}
    observers = {name: Observer(channels=name in channels) for name in modules}
    labels = TensorLabels()

    def hook(name):
        o, k = observers[name], multipliers.get(name)
        record = first_inputs is not None and name in channels

        def observe_input(_m, args):
            if record and name not in first_inputs:
                first_inputs[name] = labels(args[0])
            o.add(args[0] if k is None else args[0] * k)

        return observe_input

    hooks = [m.register_forward_pre_hook(hook(name)) for name, m in modules.items()]
    batches = 0
    try:
        with torch.no_grad():
            for batch in samples:
                run_model(model, batch)
                batches += 1
    finally:
        for h in hooks:
            h.remove()
    if batches == 0:
        raise ValueError("zenith.quantize: the calibration data gave no batches")
    return observers, batches


def tensors_of(out):
    """The floating-point tensors in a model output (a tensor, a tuple / list / dict of
    them, or a transformers ModelOutput), in order."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, Mapping):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in tensors_of(o)]
    return []


def relative_error(ref, out):
    """|out - ref| / |ref| over all the tensors of two outputs (L2 norms)."""
    a, b = tensors_of(ref), tensors_of(out)
    num = sum(float((y.float() - x.float()).pow(2).sum()) for x, y in zip(a, b))
    den = sum(float(x.float().pow(2).sum()) for x in a)
    return math.sqrt(num / den) if den > 0 else math.sqrt(num)
