"""The benchmark's runner: a run's Config, interleaved timing of the contestants with
their answers checked against eager in the same run, fresh-process probes, and the
result records (ok, skipped with a reason, failed)."""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field

import torch

from zenith.bench import peers, stats


@dataclass
class Config:
    frameworks: tuple = ("eager", "inductor", "zenith")
    threads: int = 2
    iterations: int = 20
    warmup: int = 3
    batch: int = 1
    seq: int = 128
    new_tokens: int = 32
    steps: int = 50  # optimizer steps per contestant in the training workloads
    dtype: str = "fp32"  # single-call inference workloads: fp32, bf16 or fp16
    quant: tuple = ("fp32",)  # Zenith's contestants: 'zenith' (fp32) and 'zenith:<scheme>' for the others
    ppl_tokens: int = 2048  # tokens of text the perplexity workloads score
    empty_inductor_cache: bool = True  # each fresh-process probe gets an empty Inductor cache of its own
    # every timed call waits until the threads of the call before have stopped (stats.settle); off only
    # where all contestants share torch's libgomp pool (the machine workload's GEMMs), whose spinning
    # serves the next call instead of competing with it
    settle: bool = True
    progress: object = None  # callable(str) for progress lines
    bar: object = None  # callable(done, total, label) for the progress bar
    extra: dict = field(default_factory=dict)


def say(cfg, msg):
    if cfg.progress:
        cfg.progress(msg)


def skipped(reason):
    return {"status": "skipped", "reason": reason}


def failed(e):
    return {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}


def flat(out):
    if isinstance(out, torch.Tensor):
        return out.detach().float().reshape(-1)
    if hasattr(out, "last_hidden_state"):
        return flat(out.last_hidden_state)
    if hasattr(out, "logits"):
        return flat(out.logits)
    if isinstance(out, (list, tuple)):
        return torch.cat([flat(o) for o in out])
    raise TypeError(f"cannot compare output of type {type(out).__name__}")


def agreement(ref, got):
    a, b = flat(ref), flat(got)
    d = (a - b).abs()
    scale = a.abs().max().clamp(min=1e-30)
    cos = torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=0).item()
    return {"max_abs_err": d.max().item(), "max_rel_err": (d.max() / scale).item(), "cosine": cos}


def _rss_mib():
    """Current resident set size of this process (Linux), MiB; 0 where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return 0.0


def run_interleaved(cfg, fns, check):
    """fns: framework -> zero-arg callable (first call compiles). Cold start is the
    first call alone; then warm-up; then `iterations` rounds in the orders of
    stats.round_orders (within a round, each contestant after each other one
    equally often over a whole design), each call (cold ones too) once the threads of
    the one before have gone quiet (stats.settle, unless cfg.settle is off): how long a
    contestant's threads ran on after its calls is its `busy_after_s` (median), and
    `never_quiet` counts its calls after which they had not stopped within the limit.
    check(framework, output) -> agreement dict.

    The contestants are models of their own, but instances of one class share their
    forward's code, and Dynamo compiles one code object recompile_limit times (8) and
    then runs it in eager PyTorch with a log warning: four quantized TinyLlamas (two or
    three frames each) left the fourth one's decode uncompiled, 1.6x slower. Here the
    limit grows with the contestants, and hitting it anyway fails the contestant
    (fail_on_recompile_limit_hit) rather than timing eager PyTorch under its name; a
    contestant that fails after its first call is dropped from the later rounds, the
    others go on. (The limit is per code object: the contestant that meets it is the one
    compiling when it is reached.)"""
    limit = max(torch._dynamo.config.recompile_limit, 8 * len(fns))
    with torch._dynamo.config.patch(recompile_limit=limit, fail_on_recompile_limit_hit=True):
        return _run_interleaved(cfg, fns, check)


def _run_interleaved(cfg, fns, check):
    results, alive, outputs = {}, {}, {}
    for fw, fn in fns.items():
        try:
            if cfg.settle:
                stats.settle()
            rss = _rss_mib()
            t = time.perf_counter()
            out = fn()
            cold = time.perf_counter() - t
            outputs[fw] = out
            results[fw] = {"status": "ok", "cold_start_s": cold, "samples_s": [],
                           "rss_added_mib": max(0.0, _rss_mib() - rss)}
            alive[fw] = fn
        except Exception as e:  # a failing contestant is reported; the run goes on
            results[fw] = failed(e)

    def drop(fw, e):  # a contestant failing after its first call (a wrong answer, a recompile past the limit)
        results[fw] = failed(e)
        del alive[fw]

    for fw in list(alive):
        try:
            results[fw]["agreement"] = check(fw, outputs[fw])
        except Exception as e:
            drop(fw, e)
    for _ in range(cfg.warmup):
        for fw, fn in list(alive.items()):
            try:
                fn()
            except Exception as e:
                drop(fw, e)
    names = list(alive)
    busy, last = {fw: [] for fw in names}, None

    def quiet():  # waits for the quiet, charging the wait to the contestant that ran last
        if cfg.settle:
            waited = stats.settle()
            if last:
                busy[last].append(waited)

    for i, order in enumerate(stats.round_orders(names, cfg.iterations)):
        if cfg.bar:
            cfg.bar(i, cfg.iterations, ", ".join(names))
        for fw in order:
            if fw not in alive:
                continue
            quiet()
            t = time.perf_counter()
            try:
                alive[fw]()
            except Exception as e:
                drop(fw, e)
                continue
            results[fw]["samples_s"].append(time.perf_counter() - t)
            last = fw
    quiet()
    names = [fw for fw in names if fw in alive]
    if cfg.bar and names:
        cfg.bar(cfg.iterations, cfg.iterations, ", ".join(names))
    for fw in names:
        r = results[fw]
        peer = fw.split(":")[0]  # a peer's variants ('llamacpp:q4_k_m') share its settings unless they have their own
        setting = peers.SETTINGS.get(fw, peers.SETTINGS.get(peer))
        if setting:
            r["settings"] = setting.format(t=cfg.threads)
        r["latency"] = stats.summary(r["samples_s"])
        if busy[fw]:
            r["busy_after_s"] = statistics.median(busy[fw])
            r["never_quiet"] = sum(w >= stats.SETTLE_LIMIT for w in busy[fw])
            if r["never_quiet"]:
                say(cfg, f"warning: {fw}'s threads were still running {stats.SETTLE_LIMIT:g} s after "
                         f"{r['never_quiet']} of its {len(busy[fw])} calls; the next calls ran beside them")
        r["compile_s_estimate"] = max(0.0, r["cold_start_s"] - r["latency"]["median"])
    if "eager" in alive:
        base = results["eager"]["samples_s"]
        for fw in names:
            ratio, lo, hi = stats.paired_ratio_ci(base, results[fw]["samples_s"])
            results[fw]["ratio_vs_eager"] = {"median": ratio, "ci_lo": lo, "ci_hi": hi,
                                             "verdict": stats.verdict(ratio, lo, hi)}
    return results


def note_zenith(results, reports):
    """Adds what Zenith compiled (from its graph reports) to its result: zenith.freeze's
    graphs (traced by torch.export) to zenith-frozen's, the others to zenith's."""
    for fw in ("zenith", "zenith-frozen"):
        mine = [r for r in reports if (r.aten_trace == "export") == (fw == "zenith-frozen")]
        if results.get(fw, {}).get("status") == "ok":
            results[fw]["nodes_native"] = sum(r.nodes_native for r in mine)
            results[fw]["nodes_fallback"] = sum(r.nodes_total - r.nodes_native for r in mine)
            results[fw]["planned_arena_bytes"] = sum(r.planned_bytes for r in mine)


def run_probe(code, args, **env):
    """Runs `code` in a fresh Python process with `args` and extra environment, and
    returns the JSON object it prints last, or {"reason": ...} when it fails."""
    import json
    import subprocess
    import sys

    p = None
    try:
        p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                           timeout=1800, env=dict(os.environ, **env))
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception as e:
        tail = (p.stderr.strip().splitlines() or [""])[-1] if p is not None else ""
        return {"reason": f"probe failed: {type(e).__name__}: {e} {tail}".strip()[:300]}
