"""`zenith bench report RESULT.json [--out DIR]`: markdown with PNG plots.

The markdown quotes every figure with its confidence interval, the agreement with
eager next to the speed, the machine, and the command that produced the file."""
from __future__ import annotations

import argparse
import json
import os

from zenith.bench import isa, schema, stats


COLORS = {"eager": "#888888", "inductor": "#44aa77", "zenith": "#3377cc", "onnxruntime": "#cc7733",
          "openvino": "#aa44aa", "llamacpp": "#cc3344", "torch.mm": "#888888",
          "zenith unpacked": "#99bbee", "zenith-frozen": "#1f4e8c"}


def title(w):
    """Heading of a workload: its name and, when present, batch and sequence length."""
    p = w.get("params", {})
    bits = [f"{k} {p[k]}" for k in ("batch", "seq") if k in p]
    return w["name"] + (f" ({', '.join(bits)})" if bits else "")


def slug(w):
    p = w.get("params", {})
    return w["name"] + "".join(f"-{k[0]}{p[k]}" for k in ("batch", "seq") if k in p)


def _ok(w):
    return [(fw, r) for fw, r in w["results"].items() if r.get("status") == "ok"]


def _sweeps(doc):
    """Groups of runs of one workload that differ only in seq or in batch."""
    groups = {}
    for w in doc["workloads"]:
        p = w.get("params", {})
        name = w.get("workload", w["name"])
        if "seq" in p:
            groups.setdefault((name, "seq", p.get("batch")), []).append(w)
        if "batch" in p:
            groups.setdefault((name, "batch", p.get("seq")), []).append(w)
    out = []
    for (name, axis, fixed), ws in groups.items():
        if len({w["params"][axis] for w in ws}) > 1:
            out.append((name, axis, fixed, sorted(ws, key=lambda w: w["params"][axis])))
    return out


def _plots(doc, out):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "matplotlib is not installed: no plots"
    made = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=100)
        plt.close(fig)
        made.append(name)

    for w in doc["workloads"]:
        ok = _ok(w)
        if w["name"] in ("machine", "gemm-sweep") or not ok:
            continue
        fig, ax = plt.subplots(figsize=(5.5, 3))
        med = [r["latency"]["median"] * 1e3 for _, r in ok]
        err = [[m - r["latency"]["p10"] * 1e3 for m, (_, r) in zip(med, ok)],
               [r["latency"]["p90"] * 1e3 - m for m, (_, r) in zip(med, ok)]]
        ax.bar([fw for fw, _ in ok], med, yerr=err, capsize=4, color=[COLORS.get(fw.split(":")[0], "#555") for fw, _ in ok])
        ax.set_ylabel(("step" if "loss_curve" in ok[0][1] else "latency") + ", ms (median, p10-p90)")
        ax.set_title(title(w), fontsize=9)
        save(fig, f"{slug(w)}-latency.png")
        if any("decode_tokens_s" in r for _, r in ok):
            fig, ax = plt.subplots(figsize=(5.5, 3))
            ax.bar([fw for fw, _ in ok], [r["decode_tokens_s"] for _, r in ok],
                   color=[COLORS.get(fw.split(":")[0], "#555") for fw, _ in ok])
            ax.set_ylabel("decode tokens/s (from median)")
            ax.set_title(title(w), fontsize=9)
            save(fig, f"{slug(w)}-tokens.png")
        if any("loss_curve" in r for _, r in ok):
            fig, ax = plt.subplots(figsize=(5.5, 3))
            for fw, r in ok:
                ax.plot(range(1, len(r["loss_curve"]) + 1), r["loss_curve"], label=fw, color=COLORS.get(fw.split(":")[0]),
                        linestyle="-" if fw == "eager" else "--")
            ax.set_xlabel("optimizer step")
            ax.set_ylabel("training loss")
            ax.set_title(title(w) + ": loss curves", fontsize=9)
            ax.legend()
            save(fig, f"{slug(w)}-loss.png")
    for name, axis, fixed, ws in _sweeps(doc):
        fig, ax = plt.subplots(figsize=(5.5, 3.2))
        fws = sorted({fw for w in ws for fw, _ in _ok(w)}, key=lambda f: (list(COLORS).index(f.split(":")[0]) if f.split(":")[0] in COLORS else len(COLORS), f))
        for fw in fws:
            pts = [(w["params"][axis], w["results"][fw]["latency"]) for w in ws
                   if w["results"].get(fw, {}).get("status") == "ok"]
            xs = [x for x, _ in pts]
            med = [lat["median"] * 1e3 for _, lat in pts]
            err = [[m - lat["p10"] * 1e3 for m, (_, lat) in zip(med, pts)],
                   [lat["p90"] * 1e3 - m for m, (_, lat) in zip(med, pts)]]
            ax.errorbar(xs, med, yerr=err, label=fw, color=COLORS.get(fw.split(":")[0]), marker="o", capsize=3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(axis)
        ax.set_ylabel("latency, ms (median, p10-p90)")
        other = "batch" if axis == "seq" else "seq"
        ax.set_title(f"{name}: {axis} sweep" + (f" ({other} {fixed})" if fixed is not None else ""), fontsize=9)
        ax.legend(fontsize=7)
        save(fig, f"{name}-{axis}-sweep" + (f"-{other[0]}{fixed}" if fixed is not None else "") + ".png")
    for w in doc["workloads"]:
        if w["name"] != "gemm-sweep":
            continue
        rows = w["rows"]
        labels = [f"{r['m']}x{r['n']}x{r['k']}" for r in rows]
        fig, ax = plt.subplots(figsize=(10, 3.5))
        x = range(len(rows))
        for j, fw in enumerate(("torch.mm", "zenith", "zenith unpacked")):
            ax.bar([i + (j - 1) * 0.27 for i in x], [r["results"].get(fw, {}).get("gflops", 0) for r in rows], 0.27,
                   label=fw, color=COLORS[fw])
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("GFLOP/s")
        ax.legend()
        save(fig, "gemm-sweep.png")
    return made, None


def openblas_text(machine_w):
    ob = machine_w.get("openblas") or {"reason": "not measured"}
    if "gflops" not in ob:
        return f"OpenBLAS SGEMM: {ob.get('reason')}"
    return f"OpenBLAS SGEMM ({ob['library']}, median of 5, own process): " + ", ".join(
        f"{n}^3 {g:.1f} GFLOP/s" for n, g in sorted(ob["gflops"].items(), key=lambda kv: int(kv[0])))


def machine_peak(doc):
    """(GFLOP/s, source) of the run's fp32 peak (its machine workload), or None: the
    larger of its fastest SGEMM and the ceiling its FMA rate gives (the widest fp32 FMA's
    multiply-adds a second on one core x 2 FLOP x the run's threads). The ceiling counts
    where the SGEMM falls short of the models' own GEMMs: on Zen 5 the 2048^3 SGEMM ran at
    257 GFLOP/s while BERT-base's GEMMs ran at 408-429, against an FMA ceiling of 484
    (2026-12-04). Runs before the peak was the fastest of several SGEMMs carry torch.mm's
    alone."""
    w = next((w for w in doc["workloads"] if w["name"] == "machine"), None)
    if not w:
        return None
    peak = (w["peak_sgemm_gflops"], w.get("peak_sgemm_source", "torch.mm"))
    fma = max((r["gmacs"] for r in w.get("isa_mac_rates", [])
               if r.get("supported") and r["name"].startswith("fp32 fma")), default=0.0)
    threads = doc.get("machine", {}).get("threads", 1)
    if 2 * fma * threads > peak[0]:
        peak = (2 * fma * threads, f"the FMA ceiling: {fma:.0f} GMAC/s a core x 2 FLOP x {threads} threads")
    return peak


def isa_rates_text(w):
    """The machine workload's instruction rates on one core, each int8 one also as a
    multiple of the fp32 FMA rate of the same width ('' for runs without them)."""
    rates = [r for r in w.get("isa_mac_rates", []) if r["supported"]]
    if not rates:
        return ""
    fp32 = {width: r["gmacs"] for r in rates for width in ("avx2", "avx512") if r["name"] == f"fp32 fma ({width})"}
    parts = []
    for r in rates:
        base = fp32.get("avx512" if "avx512" in r["name"] else "avx2")
        rel = f" ({r['gmacs'] / base:.2f}x fp32's)" if r["name"].startswith("int8") and base else ""
        parts.append(f"{r['name']} {r['gmacs']:.0f}{rel}")
    return "multiply-add rates on one core, GMAC/s: " + ", ".join(parts)


def peak_text(w):
    sg = w.get("sgemm_gflops") or {"torch.mm": w["peak_sgemm_gflops"]}
    return (f"{w['peak_sgemm_gflops']:.1f} GFLOP/s ({w.get('peak_sgemm_source', 'torch.mm')}; 2048^3: "
            + ", ".join(f"{k} {v:.1f}" for k, v in sg.items())
            + ("; torch.mm and Zenith best of 5, OpenBLAS median of 5" if "openblas" in sg else "") + ")")


def gemm_peak(w, peak):
    """The GFLOP/s a workload's fp32 GEMMs are shared against: the largest of the run's
    peak (machine_peak: its SGEMM or its FMA ceiling) and the Zenith 2048^3 rates
    measured right after each contestant's profile (the host drifts: a peak measured in a
    slower minute put kernels above 100%); None with neither, or for a bf16 / fp16 run
    (--dtype), whose matmuls are not fp32 GEMMs."""
    if w.get("params", {}).get("dtype", "fp32") != "fp32":
        return None
    rates = [peak[0]] if peak else []
    rates += [r["gemms"]["zenith_sgemm_2048_gflops"] for r in w["results"].values()
              if isinstance(r.get("gemms"), dict) and r["gemms"].get("zenith_sgemm_2048_gflops")]
    return max(rates) if rates else None


def gemm_rows(w, peak):
    """Each Zenith contestant's GEMMs from its profile (inference.gemm_profile), as
    (contestant, op, "MxNxK", per call, median us, GFLOP/s, share of gemm_peak or None).
    The share is only for fp32 GEMMs: a qmatmul's rate counts integer or mixed work, and
    a bf16 / fp16 run's matmuls are not fp32 ones."""
    out = []
    top = gemm_peak(w, peak)
    for fw, r in w["results"].items():
        gemms = r.get("gemms") if r.get("status") == "ok" else None
        for g in (gemms.get("rows", []) if isinstance(gemms, dict) else gemms or []):
            share = g["gflops"] / top if top and g["op"] != "qmatmul" else None
            out.append((fw, g["op"], f"{g['m']}x{g['n']}x{g['k']}", g["per_call"], g["median_us"], g["gflops"], share))
    return out


def ukernel_table(w):
    """The micro-kernel rows of a gemm-sweep: the shapes ("MxNxK"), and per kernel in
    the list's order (name, tile, ISA, how it reads A, a cell per shape: GFLOP/s or the
    status, and why a shape did not run or '')."""
    uk = w.get("ukernels") or {}
    rows = uk.get("rows", [])
    out = []
    for k in uk.get("kernels", []):
        res = [r["results"].get(k["name"], {}) for r in rows]
        cells = [f"{x['gflops']:.1f}" if "gflops" in x else x.get("status", "-") for x in res]
        note = next((x["reason"] for x in res if x.get("reason")), "")
        out.append((k["name"], f"{k['mr']}x{k['nr']}", k["isa"], k["a"], cells, note))
    return [f"{r['m']}x{r['n']}x{r['k']}" for r in rows], out


def openblas_fractions(doc):
    """(n, Zenith packed GFLOP/s, OpenBLAS GFLOP/s) for the square shapes both measured."""
    ob = next((w.get("openblas") for w in doc["workloads"] if w["name"] == "machine"), None) or {}
    blas = {int(n): g for n, g in ob.get("gflops", {}).items()}
    out = []
    for w in doc["workloads"]:
        for r in w.get("rows", []) if w["name"] == "gemm-sweep" else []:
            z = r["results"].get("zenith", {})
            if r["m"] == r["n"] == r["k"] and r["m"] in blas and "gflops" in z:
                out.append((r["m"], z["gflops"], blas[r["m"]]))
    return out


def memory_text(r):
    if "peak_rss_mib" not in r:
        return f"failed: {r.get('reason')}"
    vs = f", {r['vs_eager']:.3f}x eager's" if "vs_eager" in r else ""
    vs += f", {r['vs_zenith_fp32']:.3f}x Zenith fp32's" if "vs_zenith_fp32" in r else ""
    vs += (f" ({r['above_imports_vs_zenith_fp32']:.3f}x above the imports)"
           if "above_imports_vs_zenith_fp32" in r else "")
    first = f"; first call {r['first_call_s']:.2f} s" if "first_call_s" in r else ""
    first += f"; generate {r['generate_s']:.1f} s" if "generate_s" in r else ""
    check = (f"max abs err vs eager {r['max_abs_err']:.2g}" if "max_abs_err" in r else
             f"token agreement with eager fp32 {r['token_agreement']:.2f}" if "token_agreement" in r else "")
    imports = f"after the imports {r['imports_mib']:.0f} MiB, " if "imports_mib" in r else ""
    return (f"peak RSS {r['peak_rss_mib']:.0f} MiB{vs} ({imports}after building the model {r['after_load_mib']:.0f} MiB"
            f"{'; ' + check if check else ''}){first}")


def render_markdown(doc, plots=(), note=None):
    m = doc["machine"]
    cfg = doc["config"]
    lines = [f"# Zenith benchmark, {doc['created'][:10]}", "",
             f"Command: `{cfg.get('command', 'zenith bench')}`", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, SIMD {', '.join(m.get('simd', []))}; "
             f"threads used by every contestant: {m['threads']}; torch {m['torch']}, Zenith {m['zenith']} "
             f"(commit {m['zenith_commit']}, SGEMM kernel {m.get('zenith_sgemm_isa', '?')}). "
             + (f"ISA held by the environment: {', '.join(f'{k}={v}' for k, v in m['isa_env'].items())}. "
                if m.get("isa_env") else "") +
             f"Peak RSS of the run: {doc.get('peak_rss_mib', 0):.0f} MiB.", "",
             "Method: contestants run interleaved in one process (each round's order a row of a Williams design, "
             "so within a round each contestant runs directly after each other one equally often over a whole "
             "design) after warm-up"
             + (", each call once the threads of the call before have stopped running ('threads busy N ms after "
                "a call': how long any thread of the process ran on after that contestant's call returned)"
                if cfg.get("settle") else ", each call right after the one before (a result from before "
                "2026-12-04: a runtime whose threads still spun slowed the next contestant's call)") + "; "
             "latency is the median with p10/p90; the ratio to eager is the median of per-round ratios with a "
             "95% bootstrap interval, and a ratio whose interval contains 1.0 is reported as no difference. "
             "Every contestant's output is compared with eager's in the same run. Cold start is the first call "
             "(export/convert/compile included), with Inductor's on-disk cache "
             f"{cfg.get('inductor_cache', 'as found')}; contestants start one after another in one process, so "
             "only the first compiled one pays Dynamo's first use (bert-base-memory times each first call in a "
             "fresh process). 'RSS +N MiB' is how much the process's resident memory "
             "grew during that contestant's cold start.", ""]
    if note:
        lines += [f"_{note}_", ""]
    for w in doc["workloads"]:
        if w["name"] == "machine":
            lines += ["## machine", "", f"- peak single-precision GEMM (the fastest measured): {peak_text(w)}",
                      f"- memory bandwidth (256 MiB copy, read+write): "
                      f"{w['memory_bandwidth_gbs']:.1f} GB/s"]
            if "read_bandwidth_gbs" in w:
                lines.append(f"- memory read bandwidth (sum over 256 MiB): {w['read_bandwidth_gbs']:.1f} GB/s")
            rates = isa_rates_text(w)
            lines += [f"- {openblas_text(w)}"] + ([f"- {rates}"] if rates else []) + [""]
            continue
        if w["name"] == "gemm-sweep":
            lines += ["## gemm-sweep", "", "`zenith` packs B once (as for a weight); `zenith unpacked` takes B as "
                      "a per-call input.", "",
                      "| M x N x K | torch.mm GFLOP/s | Zenith GFLOP/s | Zenith / torch.mm (95% CI) | "
                      "unpacked GFLOP/s | unpacked / torch.mm (95% CI) | max rel err |", "|---|---|---|---|---|---|---|"]
            for r in w["rows"]:
                z, u, t = (r["results"].get(fw, {}) for fw in ("zenith", "zenith unpacked", "torch.mm"))
                err = max(x.get("agreement", {}).get("max_rel_err", float("nan")) for x in (z, u))
                lines.append(f"| {r['m']}x{r['n']}x{r['k']} | {t.get('gflops', 0):.1f} | {z.get('gflops', 0):.1f} | "
                             f"{stats.ratio_text(z.get('throughput_ratio_vs_torch'))} | {u.get('gflops', 0):.1f} | "
                             f"{stats.ratio_text(u.get('throughput_ratio_vs_torch'))} | {err:.1e} |")
            for n, zg, og in openblas_fractions(doc):
                lines.append(f"\nAt {n}^3 Zenith (packed) runs at {zg:.1f} GFLOP/s, {zg / og:.0%} of OpenBLAS's "
                             f"{og:.1f} (medians; OpenBLAS measured in its own process, see machine).")
            shapes, kernels = ukernel_table(w)
            if kernels:
                lines += ["", "Each GEMM micro-kernel alone (C = A @ B by that kernel only, one thread, operands "
                          "copied into its layouts beforehand), GFLOP/s:", "",
                          "| kernel | tile | ISA | A | " + " | ".join(shapes) + " | note |",
                          "|---" * (5 + len(shapes)) + "|"]
                lines += [f"| {name} | {tile} | {isa} | {a} | " + " | ".join(cells) + f" | {note} |"
                          for name, tile, isa, a, cells, note in kernels]
            lines += [""]
            continue
        if w["name"] == "isa-check":
            lines += ["## isa-check", "", f"Parameters: `{json.dumps(w['params'])}`. Each node class's time per "
                      "call on this CPU's widest kernels against the same model held to AVX2 (ZENITH_NO_AVX512=1), "
                      "fresh processes in alternating order; flagged: the wider path slower.", ""]
            lines += isa.table_lines(w, markdown=True)
            continue
        if "perplexity" in w:
            lines += [f"## {w['name']}", "", f"Parameters: `{json.dumps(w['params'])}`. Every contestant scores "
                      "the same token ids; lower is better.", "", "| contestant | perplexity | tokens | seconds (build, compile, score) |",
                      "|---|---|---|---|"]
            lines += [f"| {fw} | {r['perplexity']:.3f} | {r['tokens_scored']} | {r['seconds']:.1f} |" if r["status"] == "ok"
                      else f"| {fw} | {r['status']}: {r['reason']} | | |" for fw, r in w["perplexity"].items()] + [""]
            continue
        if w["name"] == "tinyllama-memory":
            lines += ["## tinyllama-memory", "", f"Parameters: `{json.dumps(w['params'])}`. Peak process memory "
                      "(VmHWM) with each contestant in a process of its own: the model built on the meta device "
                      "and made one layer at a time (each linear layer and embedding quantized as it is made), "
                      "then compiled and decoding the tokens.", ""]
            lines += [f"- {fw}: {memory_text(r)}" for fw, r in w["memory"].items()] + [""]
            continue
        if w["name"] == "bert-base-memory":
            lines += ["## bert-base-memory", "", f"Parameters: `{json.dumps(w['params'])}`. Peak process memory "
                      "(VmHWM) with each contestant in a process of its own: build the model, run it eagerly "
                      "once, compile, call three times. The first call's time is that fresh process's cold "
                      "start (Dynamo's first use and the compile included; eager: the plain call), with an "
                      "Inductor cache of its own that is empty unless the run kept the user's warm cache.", ""]
            lines += [f"- {fw}: {memory_text(r)}" for fw, r in w["memory"].items()] + [""]
            continue
        lines += [f"## {title(w)}", "", f"Parameters: `{json.dumps(w['params'])}`", ""]
        if "model_load_s" in w:
            lines += [f"Model load: {w['model_load_s']:.1f} s.", ""]
        # Runs before the read figure carry only a copy's read+write bandwidth.
        bw = next(((k, label) for k, label in (("read_bandwidth_gbs", "Memory read bandwidth measured in this "
                                                  "workload (sum over 256 MiB)"),
                                                 ("memory_bandwidth_gbs", "Memory bandwidth measured in this "
                                                  "workload (256 MiB copy, read+write)")) if k in w), None)
        if bw:
            lines += [f"{bw[1]}: {w[bw[0]]:.1f} GB/s; a contestant's share of it is the weight bytes a "
                      "token reads x its tokens/s / that bandwidth.", ""]
        lines += [
                  "| framework | median ms | p10 / p90 ms | time vs eager (95% CI) | cold start s | agreement | notes |",
                  "|---|---|---|---|---|---|---|"]
        rows = sorted(w["results"].items(), key=lambda kv: kv[1].get("status") != "ok")  # measured first
        for fw, r in rows:
            if r.get("status") != "ok":
                lines.append(f"| {fw} | - | - | - | - | - | {r['status']}: {r['reason']} |")
                continue
            lat, rv = r["latency"], r.get("ratio_vs_eager")
            ratio = f"{stats.ratio_text(rv, 'x')} {rv['verdict']}" if rv else "-"
            ag = r.get("agreement", {})
            ag_s = "; ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in ag.items())
            notes = []
            if "decode_tokens_s" in r:
                rest = f" ({r['after_first_tokens_s']:.1f} after the first)" if "after_first_tokens_s" in r else ""
                ttft = f", TTFT {r['time_to_first_token_s'] * 1e3:.0f} ms" if "time_to_first_token_s" in r else ""
                notes.append(f"{r['decode_tokens_s']:.1f} tok/s{rest}{ttft}")
            if "bandwidth_share" in r:
                notes.append(f"{r['weight_bytes_per_token'] / 1e6:.0f} MB of weights a token, "
                             f"{r['bandwidth_share']:.0%} of the bandwidth")
            if "loss_curve" in r:
                notes.append(f"final loss {r['loss_curve'][-1]:.4f} after {len(r['loss_curve'])} steps")
            if "settings" in r:
                notes.append(r["settings"])
            if "planned_arena_bytes" in r:
                notes.append(f"planned arena {r['planned_arena_bytes'] / 2**20:.1f} MiB")
            if r.get("rss_added_mib"):
                notes.append(f"RSS +{r['rss_added_mib']:.0f} MiB at cold start")
            if r.get("busy_after_s"):
                notes.append(f"threads busy {r['busy_after_s'] * 1e3:.1f} ms after a call")
            if "nodes_native" in r:
                notes.append(f"{r['nodes_native']} nodes native, {r['nodes_fallback']} fallback")
            lines.append(f"| {fw} | {lat['median'] * 1e3:.2f} | {lat['p10'] * 1e3:.2f} / {lat['p90'] * 1e3:.2f} | "
                         f"{ratio} | {r['cold_start_s']:.2f} | {ag_s} | {'; '.join(notes)} |")
        lines += [""]
        peak = machine_peak(doc)
        gemms = gemm_rows(w, peak)
        if gemms:
            top, beside = gemm_peak(w, peak), gemm_peak(w, None)
            bases = ([f"the run's peak ({peak[0]:.1f}: {peak[1]})"] if peak else []) + (
                [f"Zenith's 2048^3 measured right after each profile (up to {beside:.1f})"] if beside else [])
            lines += ["Each Zenith contestant's GEMMs, from its kernel profile over "
                      "a few calls after the timed rounds (GFLOP/s: 2 M N K over the median call, any fused "
                      "epilogue included); "
                      + ("no share of peak: not fp32" if w.get("params", {}).get("dtype", "fp32") != "fp32"
                         else "no peak was measured in this run, so no share of it" if top is None else
                         f"the share is of {top:.1f} GFLOP/s, "
                         + ("the largest of " + " and ".join(bases) if len(bases) > 1 else bases[0])) + ":", "",
                      "| contestant | op | M x N x K | per call | median us | GFLOP/s | of peak |",
                      "|---|---|---|---|---|---|---|"]
            lines += [f"| {fw} | {op} | {mnk} | {n:g} | {us:.1f} | {gf:.1f} | {'-' if sh is None else f'{sh:.0%}'} |"
                      for fw, op, mnk, n, us, gf, sh in gemms] + [""]
        for kind in ("latency", "tokens", "loss"):
            p = f"{slug(w)}-{kind}.png"
            if p in plots:
                lines += [f"![{title(w)} {kind}]({p})", ""]
    sweeps = [p for p in plots if "-sweep-" in p]
    if sweeps:
        lines += ["## sweeps", ""]
        lines += [f"![{p[:-4]}]({p})" for p in sweeps] + [""]
    if "gemm-sweep.png" in plots:
        lines += ["![gemm sweep](gemm-sweep.png)", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="zenith bench report")
    ap.add_argument("result")
    ap.add_argument("--out", default=None, help="directory for report.md and plots (default: beside the JSON)")
    args = ap.parse_args(argv)
    doc = schema.validate(json.load(open(args.result)))
    out = args.out or os.path.dirname(os.path.abspath(args.result))
    os.makedirs(out, exist_ok=True)
    plots, note = _plots(doc, out)
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write(render_markdown(doc, plots, note))
    print(f"wrote {path}" + (f" and {len(plots)} plot(s)" if plots else ""))
    return 0
