"""The machine and the GEMM: peak SGEMM (torch.mm, OpenBLAS, Zenith), memory bandwidth,
and Zenith's GEMM against torch.mm over a sweep of shapes."""
from __future__ import annotations

import time

import torch

from zenith.bench import stats
from zenith.bench.runner import Config, agreement, run_interleaved, run_probe, say


GEMM_SHAPES = [(1, 768, 768), (1, 3072, 768), (1, 4096, 4096), (4, 768, 3072), (8, 4096, 1024), (16, 768, 768),
               (64, 1024, 1024), (128, 768, 3072),
               (128, 3072, 768), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
               (4096, 4096, 4096)]


def zenith_mm(A, B, packed):
    """A call of Zenith's runtime computing A @ B: one matmul node; with packed, B is a
    constant input the runtime packs once (as for a weight), else packed or read in
    place on every call."""
    from zenith import _C
    from zenith.callpath import _raw

    g = _C.Graph()
    a = g.add_input("a", "f32", list(A.shape))
    b = g.add_input("b", "f32", list(B.shape))
    g.set_outputs(g.add_node("matmul", [a, b]))
    exe = _C.Executable(g)
    if packed:
        exe.set_constant_inputs([1])
    # run_raw with (data_ptr, dtype, shape) built per call: the backend's call path
    # (run() imports DLPack capsules, ~20 us more per call).
    return lambda: exe.run_raw([_raw(A, []), _raw(B, [])])[0]


def gemm_sweep(cfg):
    """C = A @ B per shape against torch.mm: "zenith" packs B once, as the runtime does
    for a weight (nn.Linear, conv filters); "zenith unpacked" gets B as a per-call
    input and packs it (or reads it in place) on every call. OpenBLAS is measured in
    `machine`, in its own process: its spinning threads would slow whoever runs next."""
    from zenith import _C

    torch.set_num_threads(cfg.threads)
    rows = []
    for (m, n, k) in cfg.extra.get("gemm_shapes", GEMM_SHAPES):
        A, B = torch.randn(m, k), torch.randn(k, n)
        ref = torch.mm(A, B)
        _C.set_num_threads(cfg.threads)
        fns = {"torch.mm": lambda: torch.mm(A, B), "zenith": zenith_mm(A, B, packed=True),
               "zenith unpacked": zenith_mm(A, B, packed=False)}
        iters = max(5, min(cfg.iterations, int(2e10 / (2 * m * n * k))))
        sub = Config(iterations=iters, warmup=2, threads=cfg.threads, settle=False)  # one libgomp pool for all
        res = run_interleaved(sub, fns, lambda fw, out: agreement(ref, out))
        flops = 2 * m * n * k
        for r in res.values():
            if r["status"] == "ok":
                r["gflops"] = flops / r["latency"]["median"] / 1e9
        for fw in ("zenith", "zenith unpacked"):
            if res[fw]["status"] == "ok" and res["torch.mm"]["status"] == "ok":
                ratio, lo, hi = stats.paired_ratio_ci(res[fw]["samples_s"], res["torch.mm"]["samples_s"])
                res[fw]["throughput_ratio_vs_torch"] = {"median": ratio, "ci_lo": lo, "ci_hi": hi}
        rows.append({"m": m, "n": n, "k": k, "results": res})
        say(cfg, f"gemm {m}x{n}x{k}: zenith {res['zenith'].get('gflops', 0):.1f} GFLOP/s "
                  f"(unpacked {res['zenith unpacked'].get('gflops', 0):.1f}), "
                  f"torch.mm {res['torch.mm'].get('gflops', 0):.1f}")
    return {"name": "gemm-sweep", "params": {"dtype": "fp32", "shapes": len(rows)},
            "results": {"zenith": {"status": "skipped", "reason": "see rows"}}, "rows": rows,
            "ukernels": ukernel_rows(cfg)}


# Shapes for the micro-kernels alone: operands that stay in L2, one with whole tiles
# of every kernel (6- and 8-row, 8- to 32-column) and one with tails everywhere.
UKERNEL_SHAPES = [(240, 256, 256), (97, 250, 255)]


def ukernel_rows(cfg):
    """Every GEMM micro-kernel of Zenith's list (`_C.gemm_ukernels()`) alone: C = A @ B
    by that kernel only, on one thread, with A and B copied into its layouts once
    (`_C.GemmUkernelCase`), so the time is the register tile's and nothing else. The
    kernels this CPU runs are timed side by side (interleaved) and checked against
    torch.mm; the others are listed as skipped."""
    from zenith import _C

    rows = []
    for (m, n, k) in cfg.extra.get("ukernel_shapes", UKERNEL_SHAPES):
        A, B = torch.randn(m, k), torch.randn(k, n)
        ref = torch.mm(A, B)
        fns, skipped = {}, {}
        for u in _C.gemm_ukernels():
            if not u["supported"]:
                skipped[u["name"]] = {"status": "skipped", "reason": f"needs {u['isa']}, which this CPU lacks"}
                continue
            case, C = _C.GemmUkernelCase(u["name"], A, B), torch.empty(m, n)
            fns[u["name"]] = lambda case=case, C=C: (case.run(C), C)[1]
        iters = max(5, min(cfg.iterations, int(2e10 / (2 * m * n * k))))
        res = run_interleaved(Config(iterations=iters, warmup=2, threads=1, settle=False), fns,
                              lambda fw, out: agreement(ref, out))
        for r in res.values():
            if r["status"] == "ok":
                r["gflops"] = 2 * m * n * k / r["latency"]["median"] / 1e9
        res.update(skipped)
        rows.append({"m": m, "n": n, "k": k, "results": {u["name"]: res[u["name"]] for u in _C.gemm_ukernels()}})
        say(cfg, f"micro-kernels {m}x{n}x{k}: " + ", ".join(
            f"{name} {r['gflops']:.1f}" for name, r in res.items() if "gflops" in r) + " GFLOP/s")
    return {"kernels": _C.gemm_ukernels(), "rows": rows}


def _best_rate(fn, amount, runs=5):
    """amount / seconds of fn(), in billions: the best of `runs` calls after a warm-up."""
    fn()
    best = 0.0
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = max(best, amount / (time.perf_counter() - t) / 1e9)
    return best


def _best_gbs(threads, op, bytes_moved):
    """GB/s of op(src) on a 256 MiB float32 buffer with `threads` threads: the best of 5
    runs after a warm-up, counting bytes_moved bytes per run."""
    torch.set_num_threads(threads)
    src = torch.empty(64 * 2 ** 20, dtype=torch.float32).fill_(1.0)  # 256 MiB
    return _best_rate(lambda: op(src), bytes_moved(src))


def copy_bandwidth_gbs(threads):
    """Memory bandwidth in GB/s: the best of 5 copies of 256 MiB with `threads` threads,
    counting the bytes read and written."""
    dst = torch.empty(64 * 2 ** 20, dtype=torch.float32)
    return _best_gbs(threads, dst.copy_, lambda src: 2 * src.numel() * 4)  # read + write


def read_bandwidth_gbs(threads):
    """Memory read bandwidth in GB/s: the best of 5 sums over 256 MiB with `threads`
    threads, counting the bytes read. The bound of a decode step, which streams its
    weights and writes next to nothing: a copy's read+write figure sits below it (its
    stores first read the lines they fill), so fp32 decode read 116% of it on Zen 5."""
    return _best_gbs(threads, torch.Tensor.sum, lambda src: src.numel() * 4)


def sgemm_2048(runs=5):
    """Zenith's own 2048^3 SGEMM (packed B), best of `runs`, GFLOP/s."""
    n = 2048
    return _best_rate(zenith_mm(torch.randn(n, n), torch.randn(n, n), packed=True), 2 * n ** 3, runs)


def peak_sgemm(sgemm):
    """The machine's peak single-precision GEMM: the fastest of the large square SGEMMs
    measured ({library: GFLOP/s}), as (GFLOP/s, library). Zenith's own is among them, so
    a share of this peak is never a share of a slower library's figure."""
    name = max(sgemm, key=sgemm.get)
    return sgemm[name], name


def machine(cfg):
    """Peak single-precision GEMM (the fastest of torch.mm, OpenBLAS and Zenith at a
    large square), memory bandwidth (copy, read), and each GEMM instruction's
    multiply-add rate on one core (`_C.isa_mac_rates`: fp32 FMA and the int8 dot
    products; their ratio bounds what int8 can gain over fp32 on this CPU)."""
    from zenith import _C

    torch.set_num_threads(cfg.threads)
    _C.set_num_threads(cfg.threads)
    n = 2048
    A, B = torch.randn(n, n), torch.randn(n, n)
    sgemm = {"torch.mm": _best_rate(lambda: torch.mm(A, B), 2 * n ** 3), "zenith": sgemm_2048()}
    blas = openblas_sgemm(cfg.threads)
    if n in blas.get("gflops", {}):  # the same size (its probe's median of 5, in a process of its own)
        sgemm["openblas"] = blas["gflops"][n]
    peak, source = peak_sgemm(sgemm)
    return {"name": "machine", "params": {"gemm_n": n, "copy_mib": 256, "read_mib": 256},
            "results": {}, "sgemm_gflops": sgemm, "peak_sgemm_gflops": peak, "peak_sgemm_source": source,
            "memory_bandwidth_gbs": copy_bandwidth_gbs(cfg.threads),
            "read_bandwidth_gbs": read_bandwidth_gbs(cfg.threads), "openblas": blas,
            "isa_mac_rates": _C.isa_mac_rates()}


_OPENBLAS_PROBE = """
import json, sys, time
import numpy as np
blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
if "openblas" not in blas.get("name", ""):
    print(json.dumps({"reason": "numpy here is built on " + str(blas.get("name"))})); sys.exit()
out = {"library": blas["name"] + " " + str(blas.get("version", "")), "gflops": {}}
for n in map(int, sys.argv[1:]):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    a @ b
    ts = []
    for _ in range(5):
        t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
    out["gflops"][n] = 2 * n ** 3 / sorted(ts)[2] / 1e9
print(json.dumps(out))
"""


def openblas_sgemm(threads, sizes=(2048, 4096)):
    """OpenBLAS's large square SGEMM (numpy's, median of 5) with `threads` threads, in a
    process of its own: OpenBLAS's threads spin after each call and would slow the
    contestants that share this process."""
    out = run_probe(_OPENBLAS_PROBE, sizes, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    if "gflops" in out:
        out["gflops"] = {int(n): g for n, g in out["gflops"].items()}
    return out
