"""isa-check: does each of Zenith's wider kernel paths beat the AVX2 path it replaces?

No pass/fail test can see a kernel that compiles slower on one instruction set: on
2026-11-28 a ReLU select that GCC lowered lane by lane made the AVX-512 convs of
ResNet-50 8x slower than planned, and the AVX2 path, the one Zen 4 ran, hid it until a
full-width AVX-512 CPU was benchmarked three days later. This workload runs each model's
nodes under Zenith's profiler in fresh processes, alternately on this CPU's own kernels
and held to AVX2 (ZENITH_NO_AVX512=1 ZENITH_NO_AVXVNNI=1), sums the per-node medians by class (op and map or
output shape), and flags each class whose wider path takes longer than AVX2's."""
from __future__ import annotations

import statistics

from zenith.bench.runner import run_probe, say

MODELS = ("resnet50", "mobilenet-v2", "minilm")
FLAG_RATIO = 1.10  # wider path / AVX2 path above this, ...
FLAG_SHARE = 0.02  # ... on a class holding at least this share of the model's node time

_PROBE = """
import collections, json, os, sys, torch, zenith
from zenith import _C
name, threads, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0); torch.set_num_threads(threads)
if name == "minilm":
    from transformers import BertConfig, BertModel
    m = BertModel(BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536))
    args = (torch.randint(0, 30000, (1, 128)), torch.ones(1, 128, dtype=torch.long))
elif name == "small-cnn":  # the tests' model: a blocked chain, seconds to run
    nn = torch.nn
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 1), nn.ReLU(),
                      nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
    args = (torch.randn(1, 3, 32, 32),)
else:
    import torchvision
    m = getattr(torchvision.models, name.replace("-", "_"))()
    args = (torch.randn(1, 3, 224, 224),)
f = zenith.freeze(m.eval())
with torch.no_grad():
    for _ in range(3): f(*args)
    with zenith.profile(trace=os.devnull) as p:
        for _ in range(calls): f(*args)
per = collections.defaultdict(list)
for op, node, graph, tid, ts, dur, shape in p.events:
    if len(shape) in (4, 5):  # NCHW or blocked [N, CB, H, W, L]: by op and map (block widths differ)
        key = f"{op} {shape[0]}x{shape[2]}x{shape[3]}"
    else:
        key = f"{op} {'x'.join(map(str, shape))}"
    per[(graph, node, key)].append(dur)
classes = collections.defaultdict(float)
for (graph, node, key), d in per.items():
    classes[key] += sorted(d)[len(d) // 2] * len(d) / calls / 1e3  # ms per call
print(json.dumps({"isa": _C.sgemm_isa(), "classes": classes}))
"""


def flag_classes(wide, narrow, ratio=FLAG_RATIO, share=FLAG_SHARE):
    """Rows per class from {class: [ms per round]} on the wider path and on AVX2: medians,
    wide / AVX2, each class's share of the wider path's total, and whether it is flagged
    (ratio above `ratio` on at least `share` of the time), slowest-relative first."""
    total = sum(statistics.median(v) for v in wide.values()) or 1.0
    rows = []
    for key in sorted(set(wide) & set(narrow)):
        w, n = statistics.median(wide[key]), statistics.median(narrow[key])
        r = w / n if n > 0 else float("inf")
        rows.append({"class": key, "wide_ms": w, "avx2_ms": n, "ratio": r, "share": w / total,
                     "flagged": r > ratio and w / total >= share})
    return sorted(rows, key=lambda row: -row["ratio"])


def isa_check(cfg):
    """Per model (cfg.extra["isa_models"], default MODELS; batch 1, MiniLM at seq 128),
    `rounds` pairs of fresh processes (cfg.extra, default 3), in alternating order: the
    node classes whose wider path is slower than AVX2's."""
    models = cfg.extra.get("isa_models", MODELS)
    rounds, calls = max(1, cfg.extra.get("isa_rounds", 3)), max(5, cfg.iterations)
    params = {"models": list(models), "rounds": rounds, "calls": calls, "flag_ratio": FLAG_RATIO,
              "flag_share": FLAG_SHARE}
    rows, reason = [], None
    for name in models:
        runs = {"wide": [], "avx2": []}
        isa = {}
        for r in range(rounds):
            for path in (("wide", "avx2") if r % 2 == 0 else ("avx2", "wide")):
                env = {"ZENITH_NO_AVX512": "1", "ZENITH_NO_AVXVNNI": "1"} if path == "avx2" else {}
                out = run_probe(_PROBE, (name, cfg.threads, calls), **env)
                if "classes" not in out:
                    reason = f"{name}: {out.get('reason', 'no result')}"
                    break
                isa[path] = out["isa"]
                runs[path].append(out["classes"])
            if reason:
                break
        if reason:
            break
        if isa["wide"] == isa["avx2"]:
            reason = f"this CPU's widest GEMM path is {isa['wide']}: nothing wider than AVX2 to check"
            break
        keys = set().union(*runs["wide"], *runs["avx2"])
        series = {p: {k: [c.get(k, 0.0) for c in runs[p]] for k in keys} for p in runs}
        classes = flag_classes(series["wide"], series["avx2"])
        rows.append({"model": name, "isa": isa, "classes": classes})
        flagged = [c for c in classes if c["flagged"]]
        say(cfg, f"isa-check {name}: {isa['wide']} against {isa['avx2']}: " + (
            ", ".join(f"{c['class']} {c['ratio']:.2f}x" for c in flagged) + " slower" if flagged
            else "no class slower"))
    status = {"status": "skipped", "reason": reason or "see rows"}
    return {"name": "isa-check", "params": params, "results": {"zenith": status}, "rows": rows}


def table_lines(w, markdown=False):
    """The flagged classes (and each model's five most AVX2-favoured) as text or markdown
    lines, and why the run stopped short, if it did."""
    reason = w["results"]["zenith"]["reason"]
    lines = [] if reason == "see rows" else [f"isa-check: {reason}"]
    for row in w["rows"]:
        head = f"isa-check {row['model']}: {row['isa']['wide']} / {row['isa']['avx2']} time per node class"
        lines += ([f"### {head}", "", "| class | wide ms | AVX2 ms | wide / AVX2 | share | flagged |",
                   "|---|---|---|---|---|---|"] if markdown else [head + " (flagged: *)"])
        for c in [c for c in row["classes"] if c["flagged"]] or row["classes"][:5]:
            if markdown:
                lines.append(f"| {c['class']} | {c['wide_ms']:.3f} | {c['avx2_ms']:.3f} | {c['ratio']:.2f} | "
                             f"{c['share']:.1%} | {'yes' if c['flagged'] else ''} |")
            else:
                lines.append(f"  {'*' if c['flagged'] else ' '} {c['class']:<36} {c['wide_ms']:8.3f} ms "
                             f"{c['avx2_ms']:8.3f} ms  {c['ratio']:.2f}x  {c['share']:.1%}")
        if markdown:
            lines.append("")
    return lines
