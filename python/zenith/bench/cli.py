"""`zenith bench`: run workloads side by side, write a versioned JSON, print a table.

    zenith bench [WORKLOAD ...] [--frameworks eager,inductor,zenith] [--threads 2]
                 [--iterations 20] [--warmup 3] [--batch 1] [--seq 128] [--new-tokens 32]
                 [--json PATH]
    zenith bench report RESULT.json [--out DIR]
    zenith bench compare BASELINE.json NEW.json [--threshold 5%]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

from zenith.bench import isa, report, schema, stats

# Workloads that take --seqs (a sequence-length sweep), with their default lengths.
# Zenith's --quant contestants (issue 16).
QUANT_SCHEMES = ("fp32", "gguf", "int8", "int4", "int4-g64", "int4-g128", "nf4", "int8-dynamic", "int8-static",
                 "int8-dynamic-w7")
SEQ_SWEEPS = {"minilm": None, "bert-base-sweep": [8, 32, 128, 512]}
BATCH_SWEEPS = ("resnet50", "mobilenet-v2")  # workloads that take --batches
STANDARD = ["machine", "gemm-sweep", "bert-base", "bert-base-memory", "minilm", "resnet50", "mobilenet-v2", "gpt2-decode", "gemma3-270m-decode",
            "train-transformer-43m", "train-lora"]


# Environment variables that change which instructions a contestant runs (Zenith's kernels,
# oneDNN under OpenVINO and Inductor, ATen's own, MKL's): a run held to AVX2 on an AVX-512
# CPU is a different measurement, so its file says so.
ISA_ENV = ("ZENITH_NO_AVX512", "ZENITH_NO_AVXVNNI", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
           "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE")


def isa_env():
    """The ISA_ENV variables set in this process, name -> value."""
    return {k: os.environ[k] for k in ISA_ENV if k in os.environ}


def machine_info(threads):
    import torch

    from zenith import __version__
    from zenith import _C  # noqa: F401

    cpu, flags, ident = platform.processor() or "unknown", set(), {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = (part.strip() for part in line.partition(":"))
                if key == "model name":
                    cpu = value
                elif key in ("cpu family", "model"):  # a VM's "AMD EPYC" alone hides Zen 3 from Zen 4
                    ident[key] = value
                elif key == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    if ident:
        cpu += f" (family {ident.get('cpu family', '?')}, model {ident.get('model', '?')})"
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile") if f in flags]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(__file__), timeout=5).stdout.strip() or "unknown"
    except Exception:
        commit = "unknown"
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": threads, "simd": simd, "python": platform.python_version(),
            "torch": torch.__version__, "zenith": __version__, "zenith_commit": commit,
            "zenith_sgemm_isa": _sgemm_isa(), "isa_env": isa_env(), "os": platform.platform()}


def _sgemm_isa():
    from zenith import _C

    return _C.sgemm_isa() if hasattr(_C, "sgemm_isa") else "unknown"


def run(args):
    from zenith.bench.contestants import ALL_FRAMEWORKS
    from zenith.bench.runner import Config
    from zenith.bench.workloads import WORKLOADS

    names = args.workloads or STANDARD
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        sys.exit(f"unknown workload(s): {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    fws = tuple(f.strip() for f in args.frameworks.split(",") if f.strip())
    bad = [f for f in fws if f not in ALL_FRAMEWORKS]
    if bad:
        sys.exit(f"unknown framework(s): {', '.join(bad)}; known: {', '.join(ALL_FRAMEWORKS)}")
    badq = [q for q in args.quant if q not in QUANT_SCHEMES]
    if badq:
        sys.exit(f"unknown --quant scheme(s): {', '.join(badq)}; known: {', '.join(QUANT_SCHEMES)}")
    if not args.warm_inductor_cache:
        # Inductor keeps compiled kernels on disk between runs; a cold start measured on a
        # warm cache is not a cold start. Unless asked otherwise, it starts empty.
        import atexit
        import shutil
        import tempfile

        cache = tempfile.mkdtemp(prefix="zenith-bench-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        atexit.register(shutil.rmtree, cache, ignore_errors=True)  # a fresh cache each run, none left behind
    t0 = time.time()

    tty = sys.stderr.isatty()

    def progress(msg):
        print(f"{chr(13) if tty else ''}[{time.time() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def bar(done, total, label):
        # A live bar on a terminal; in logs (CI, make bench | tee) one line per quarter.
        width = 30
        filled = width * done // max(total, 1)
        text = f"[{time.time() - t0:7.1f}s] [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"
        if tty:
            print("\r" + text, end="\n" if done == total else "", file=sys.stderr, flush=True)
        elif done == total or (total >= 4 and done % max(1, total // 4) == 0 and done):
            print(text, file=sys.stderr, flush=True)

    cfg = Config(frameworks=fws, threads=args.threads, iterations=args.iterations, warmup=args.warmup,
                 batch=args.batch, seq=args.seq, new_tokens=args.new_tokens, steps=args.steps, dtype=args.dtype,
                 quant=args.quant, ppl_tokens=args.ppl_tokens, progress=progress,
                 bar=bar, empty_inductor_cache=not args.warm_inductor_cache)
    doc = {"schema": schema.SCHEMA, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "machine": machine_info(args.threads),
           "config": {"frameworks": list(fws), "threads": args.threads, "iterations": args.iterations,
                      "warmup": args.warmup, "batch": args.batch, "seq": args.seq, "new_tokens": args.new_tokens,
                      "seqs": args.seqs, "batches": args.batches, "steps": args.steps, "dtype": args.dtype,
                      "quant": list(args.quant), "ppl_tokens": args.ppl_tokens,
                      "inductor_cache": "warm (user's)" if args.warm_inductor_cache else "empty at start",
                      "settle": True,  # each timed call after the quiet (stats.settle); absent in older files
                      "command": " ".join(["zenith bench"] + list(getattr(args, "argv", sys.argv[2:])))},
           "workloads": []}
    for i, name in enumerate(names):
        progress(f"({i + 1}/{len(names)}) {name}")
        seqs = (args.seqs or SEQ_SWEEPS[name] or [args.seq]) if name in SEQ_SWEEPS else [args.seq]
        batches = args.batches if name in BATCH_SWEEPS and args.batches else [args.batch]
        for b in batches:
            for s in seqs:
                cfg.seq, cfg.batch = s, b
                try:
                    w = WORKLOADS[name](cfg)
                except Exception as e:  # the run goes on; the failure is in the report
                    w = {"name": name, "params": {}, "results": {fw: {"status": "failed",
                                                                     "reason": f"{type(e).__name__}: {e}"[:500]}
                                                                for fw in fws}}
                w["workload"] = name
                doc["workloads"].append(w)
        cfg.seq, cfg.batch = args.seq, args.batch
    doc["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    schema.validate(doc)
    print(render_table(doc))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def render_table(doc):
    lines = []
    for w in doc["workloads"]:
        if w["name"] == "machine":
            lines.append(f"machine: peak sgemm {report.peak_text(w)}, "
                         f"memory bandwidth {w['memory_bandwidth_gbs']:.1f} GB/s (copy, read+write)"
                         + (f", {w['read_bandwidth_gbs']:.1f} GB/s (read)" if "read_bandwidth_gbs" in w else "")
                         + f"; {report.openblas_text(w)}"
                         + "".join(f"; {t}" for t in [report.isa_rates_text(w)] if t))
            continue
        if w["name"] == "gemm-sweep":
            lines.append("gemm-sweep (GFLOP/s; ratio = Zenith's throughput / torch.mm's, 95% CI; "
                         "zenith packs B once, 'unpacked' on every call):")
            for row in w["rows"]:
                z, u, t = (row["results"].get(fw, {}) for fw in ("zenith", "zenith unpacked", "torch.mm"))
                lines.append(f"  {row['m']:>5}x{row['n']:<5}x{row['k']:<5} torch.mm {t.get('gflops', 0):6.1f}  "
                             f"zenith {z.get('gflops', 0):6.1f} ratio {stats.ratio_text(z.get('throughput_ratio_vs_torch'))}"
                             f"  unpacked {u.get('gflops', 0):6.1f} ratio "
                             f"{stats.ratio_text(u.get('throughput_ratio_vs_torch'))}")
            for n, zg, og in report.openblas_fractions(doc):
                lines.append(f"  {n}^3: zenith {zg:.1f} GFLOP/s = {zg / og:.0%} of OpenBLAS {og:.1f}")
            shapes, kernels = report.ukernel_table(w)
            if kernels:
                lines.append("  micro-kernels alone, 1 thread (GFLOP/s at " + ", ".join(shapes) + "):")
                lines += [f"    {name:<28} {tile:>5} {isa:<6} {a:<6} " + "  ".join(f"{c:>7}" for c in cells)
                          + (f"  ({note})" if note else "") for name, tile, isa, a, cells, note in kernels]
            continue
        if w["name"] == "isa-check":
            lines += isa.table_lines(w)
            continue
        if "perplexity" in w:
            lines.append(f"{w['name']} {json.dumps(w['params'])}:")
            for fw, r in w["perplexity"].items():
                lines.append(f"  {fw:<16} " + (f"perplexity {r['perplexity']:.3f} over {r['tokens_scored']} tokens "
                                               f"({r['seconds']:.1f} s)" if r["status"] == "ok"
                                               else f"{r['status']}: {r['reason']}"))
            continue
        if "memory" in w:
            lines.append(f"{w['name']} {json.dumps(w['params'])} (peak RSS, each contestant in its own process):")
            lines += [f"  {fw:<14} {report.memory_text(r)}" for fw, r in w["memory"].items()]
            continue
        lines.append(f"{w['name']} {json.dumps(w['params'])}")
        for fw, r in w["results"].items():
            if r["status"] != "ok":
                lines.append(f"  {fw:<13} {r['status']}: {r['reason']}")
                continue
            lat = r["latency"]
            rv = r.get("ratio_vs_eager")
            ratio = f"{stats.ratio_text(rv, 'x')} {rv['verdict']}" if rv else ""
            agree = r.get("agreement", {})
            agree_s = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in agree.items())
            extra = f"  {r['decode_tokens_s']:.1f} tok/s" if "decode_tokens_s" in r else ""
            if "after_first_tokens_s" in r:
                extra += f" (after the first: {r['after_first_tokens_s']:.1f})"
            if "bandwidth_share" in r:
                extra += f" ({r['weight_bytes_per_token'] / 1e6:.0f} MB a token, {r['bandwidth_share']:.0%} of bandwidth)"
            if "loss_curve" in r:
                extra += f"  final loss {r['loss_curve'][-1]:.4f}"
            if r.get("busy_after_s"):
                extra += f"  busy after {r['busy_after_s'] * 1e3:.1f} ms"
            lines.append(f"  {fw:<13} median {lat['median'] * 1e3:8.2f} ms  p10 {lat['p10'] * 1e3:8.2f}  "
                         f"p90 {lat['p90'] * 1e3:8.2f}  cold {r['cold_start_s']:.2f}s  time vs eager {ratio}"
                         f"{extra}  | {agree_s}")
        for fw, op, mnk, n, us, gf, sh in report.gemm_rows(w, report.machine_peak(doc)):
            lines.append(f"    {fw} {op} {mnk} x{n:g}: {us:.1f} us, {gf:.1f} GFLOP/s"
                         + (f" ({sh:.0%} of peak)" if sh is not None else ""))
    return "\n".join(lines)


def compare(args):
    thr = float(args.threshold.rstrip("%")) / (100.0 if args.threshold.endswith("%") else 1.0)
    base = schema.validate(json.load(open(args.baseline)))
    new = schema.validate(json.load(open(args.new)))
    regressions = 0
    index = {(w["name"], json.dumps(w["params"], sort_keys=True)): w for w in base["workloads"]}
    for w in new["workloads"]:
        b = index.get((w["name"], json.dumps(w["params"], sort_keys=True)))
        if not b:
            continue
        for fw, r in w["results"].items():
            rb = b["results"].get(fw)
            if not rb or r.get("status") != "ok" or rb.get("status") != "ok":
                continue
            bad, (ratio, lo, hi) = stats.is_regression(rb["samples_s"], r["samples_s"], thr)
            mark = "REGRESSION" if bad else "ok"
            print(f"{w['name']:<20} {fw:<10} new/base {ratio:.3f} [{lo:.3f}, {hi:.3f}] {mark}")
            regressions += bad
    print(f"{regressions} significant regression(s) above {thr:.0%}")
    return 1 if regressions else 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":  # `zenith bench ...` from the console script
        argv = argv[1:]
    if argv and argv[0] == "report":
        from zenith.bench.report import main as report_main

        return report_main(argv[1:])
    if argv and argv[0] == "compare":
        ap = argparse.ArgumentParser(prog="zenith bench compare")
        ap.add_argument("baseline")
        ap.add_argument("new")
        ap.add_argument("--threshold", default="5%")
        return compare(ap.parse_args(argv[1:]))
    ap = argparse.ArgumentParser(prog="zenith bench", description="Fair, interleaved benchmarks against eager "
                                 "PyTorch and peers; every contestant's answers are checked.")
    ap.add_argument("workloads", nargs="*", help=f"default: {' '.join(STANDARD)}")
    ap.add_argument("--frameworks", default="eager,inductor,zenith")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--seqs", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="sequence-length sweep for minilm and bert-base-sweep (default 8,32,128,512)")
    ap.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=None,
                    help="batch-size sweep for resnet50 and mobilenet-v2, e.g. 1,8,32")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32",
                    help="bert-base, minilm, resnet50: run every PyTorch contestant in this dtype")
    ap.add_argument("--quant", type=lambda s: tuple(x.strip() for x in s.split(",") if x.strip()), default=("fp32",),
                    help=f"Zenith contestants, one per scheme: {','.join(QUANT_SCHEMES)} ('zenith' is fp32, the "
                         "others run as 'zenith:<scheme>'; gguf = the model file's own blocks; int8-static "
                         "calibrates on the workload's calibration batches: percentile 99.99; bert-base and minilm minmax "
                         "with smooth 0.85; int8-dynamic-w7 = int8-dynamic with linear_weight_bits=7; int4-g64 / "
                         "int4-g128 = int4 with group_size 64 / 128)")
    ap.add_argument("--ppl-tokens", type=int, default=2048, help="tokens of text the perplexity workloads score")
    ap.add_argument("--steps", type=int, default=50, help="optimizer steps per contestant in train-* workloads")
    ap.add_argument("--warm-inductor-cache", action="store_true",
                    help="keep Inductor's on-disk cache (default: an empty one, so its cold start is one)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.argv = argv  # the command as given, for the result file (`python -m zenith.bench` has no "bench")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
