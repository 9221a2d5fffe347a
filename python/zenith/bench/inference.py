"""Single-call inference workloads (BERT-base, all-MiniLM-L6-v2, ResNet-50,
MobileNet V2, a small MLP for per-call cost) and BERT-base's peak memory, each
contestant in a process of its own."""
from __future__ import annotations

import contextlib
import tempfile
import time

import torch

from zenith.backend import collect_reports
from zenith.bench import peers
from zenith.bench.contestants import base_scheme, compiled, peer_status, quant_variants, static_label
from zenith.bench.runner import agreement, flat, note_zenith, run_interleaved, run_probe, say, skipped


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def contestants(cfg, quantizable, calibration=None):
    """The run's contestant names. On a workload whose layers `zenith.quantize` takes
    (linear layers; convolutions for the int8-* schemes), Zenith runs once per `--quant`
    scheme ('zenith:int8', ...), and ONNX Runtime runs its quantized model of the same
    kind: with int8, int8-dynamic or int8-dynamic-w7 among them `quantize_dynamic`
    ('onnxruntime:int8-dynamic': int8 weights and activations quantized at run time, as
    Zenith's int8 kernels do), with int8-static `quantize_static` on the same
    calibration batches ('onnxruntime:int8-static'). OpenVINO's INT8 is NNCF's
    post-training (static) quantization on the same calibration batches
    ('openvino:int8-static'), run beside any int8 scheme: it is the INT8 a user of
    OpenVINO has for these models."""
    quant = quantizable and cfg.dtype == "fp32" and any(q not in ("fp32", "gguf") for q in cfg.quant)
    names = []
    for fw in cfg.frameworks:
        if fw == "zenith" and quant:
            names += [n for n in quant_variants(cfg, None, calibration=calibration)[0] if n != "zenith:gguf"]
        elif fw == "onnxruntime" and quant:
            names.append("onnxruntime")
            if any(base_scheme(q) in ("int8", "int8-dynamic") for q in cfg.quant):
                names.append("onnxruntime:int8-dynamic")
            if "int8-static" in cfg.quant and calibration is not None:
                names.append("onnxruntime:int8-static")
        elif fw == "openvino" and quant:
            names.append("openvino")
            if any(base_scheme(q).startswith("int8") for q in cfg.quant) and calibration is not None:
                names.append("openvino:int8-static")
        else:
            names.append(fw)
    return names


def top1_agreement(model, quantized, make_batch, samples, batch):
    """How often a quantized contestant's top-1 class equals eager fp32's, over `samples`
    inputs made by make_batch(seed) (`batch` per call; seeds apart from the timed and
    calibration inputs)."""
    agree = total = 0
    with torch.no_grad():
        for i in range((samples + batch - 1) // batch):
            (x,) = make_batch(1000 + i)
            a, b = flat(model(x)).reshape(x.shape[0], -1), flat(quantized(x)).reshape(x.shape[0], -1)
            agree += int((a.argmax(1) == b.argmax(1)).sum())
            total += x.shape[0]
    return {"samples": total, "agree": agree / total}


def unavailable(cfg, fw):
    """None when contestant `fw` can run this single-call workload here; else a
    'skipped' result saying why (a peer not installed, or asked for a dtype it does not
    run here)."""
    peer = fw.split(":")[0]
    st = peer_status(peer, supported=("onnxruntime", "openvino", "zenith-frozen") if cfg.dtype == "fp32"
                     else ("zenith-frozen",))
    if st and cfg.dtype != "fp32" and peer in ("onnxruntime", "openvino"):
        st = skipped(f"{fw} runs fp32 only in this suite (asked for {cfg.dtype})")
    if not st and fw == "openvino:int8-static":
        st = peer_status("nncf")
    return st


GEMM_PROFILE_CALLS = 3


def gemm_profile(fn, calls=GEMM_PROFILE_CALLS):
    """A Zenith contestant's GEMMs from its kernel profile over `calls` calls after the
    timed rounds: per op and M x N x K, how many a call runs, the median time of one and
    its GFLOP/s (zenith.Profile.gemm_rates); and Zenith's own 2048^3 SGEMM measured right
    after, so that the report's share of peak does not take a host that drifted since
    the machine workload for a kernel above 100%."""
    import os

    import zenith
    from zenith.bench.machine import sgemm_2048

    with zenith.profile(trace=os.devnull) as p:
        for _ in range(calls):
            fn()
    return {"rows": p.gemm_rates(calls), "zenith_sgemm_2048_gflops": sgemm_2048(runs=3)}


def model_workload(cfg, name, params, make_model, make_inputs, items, quantizable=False, calibration=None,
                   top1_batch=None, top1_samples=256, static_options=None, transformer=False):
    """Single-call inference. With --dtype bf16/fp16 every PyTorch contestant runs the
    model in that dtype, eager in that dtype is the baseline, and the agreement also
    states the cosine against the fp32 model (what the precision change costs).
    quantizable: `--quant` gives Zenith (and ONNX Runtime) quantized contestants
    (contestants()); every contestant is checked against eager fp32. calibration: the
    input tuples int8-static calibrates on, with zenith.quantize's options static_options
    (contestants.STATIC_DEFAULT where None). top1_batch(seed) -> an input tuple: for a
    classifier, each quantized Zenith contestant's top-1 agreement with eager fp32 over
    top1_samples such inputs is reported too. transformer: the model is a transformer
    (NNCF's model_type for OpenVINO's INT8)."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    model = make_model().eval()
    inputs = make_inputs()
    params = dict(params, dtype=cfg.dtype)
    ref32 = None
    if cfg.dtype != "fp32":
        with torch.inference_mode():
            ref32 = flat(model(*inputs))
        model = model.to(DTYPES[cfg.dtype])
        inputs = tuple(x.to(DTYPES[cfg.dtype]) if x.is_floating_point() else x for x in inputs)
    with torch.inference_mode():
        ref = model(*inputs)

    def check(fw, out):
        a = agreement(ref, out)
        if ref32 is not None:
            a["cosine_vs_fp32"] = torch.nn.functional.cosine_similarity(ref32.double(), flat(out).double(),
                                                                        dim=0).item()
        return a

    fns, results = {}, {}
    names = contestants(cfg, quantizable, calibration)
    variants, quantized, build_s = {}, {}, {}  # build_s: seconds zenith.quantize took (calibration included)
    if any(n.startswith("zenith:") for n in names):
        variants = quant_variants(cfg, model, calibration=calibration, static_options=static_options)[1]
        params = dict(params, quant=list(cfg.quant))
        if {"int8-dynamic", "int8-static"} & set(cfg.quant):  # what zenith.quantize's default chose here
            from zenith.quant.quantize import default_conv_weight_bits

            params["int8_conv_weight_bits"] = default_conv_weight_bits()
    calibrated = [n for n in names if n.endswith(":int8-static")]
    if calibrated and calibration is not None:  # the batches every calibrated contestant (Zenith's or a peer's) took
        params = dict(params, quant=list(cfg.quant))
        params["calibration"] = {"batches": len(calibration), "contestants": calibrated}
        if "zenith:int8-static" in calibrated:
            params["calibration"]["method"] = static_label(static_options)
    for fw in names:
        peer = fw.split(":")[0]
        st = unavailable(cfg, fw)
        if st:
            results[fw] = st
            continue
        if peer == "onnxruntime":
            fns[fw] = peers.onnxruntime_fn(model, inputs, cfg.threads, quantize=fw.partition(":")[2] or None,
                                           calibration=calibration)
            continue
        if peer == "openvino":
            fns[fw] = peers.openvino_fn(model, inputs, cfg.threads, quantize=fw.partition(":")[2] or None,
                                        calibration=calibration, transformer=transformer)
            continue
        if fw in variants:
            t0 = time.perf_counter()
            m = quantized[fw] = compiled("zenith", variants[fw]())
            build_s[fw] = time.perf_counter() - t0
        else:
            m = compiled(fw, model)
        if fw == "eager":
            def fn(m=m):
                with torch.inference_mode():
                    return m(*inputs)
        else:
            def fn(m=m):
                with torch.no_grad():
                    return m(*inputs)
        fns[fw] = fn
    torch._dynamo.reset()
    say(cfg, f"{name}: {', '.join(fns)}")
    with collect_reports() as reports:
        results.update(run_interleaved(cfg, fns, check))
    note_zenith(results, reports)
    for fw, fn in fns.items():
        if fw.split(":")[0] in ("zenith", "zenith-frozen") and results.get(fw, {}).get("status") == "ok":
            results[fw]["gemms"] = gemm_profile(fn)
    for r in results.values():
        if r.get("status") == "ok":
            r["throughput_items_s"] = items / r["latency"]["median"]
    for fw, sec in build_s.items():
        if results.get(fw, {}).get("status") == "ok":
            results[fw]["quantize_seconds"] = sec
            say(cfg, f"{name} {fw}: zenith.quantize took {sec:.1f} s")
    if top1_batch is not None:
        for fw, m in quantized.items():
            if results.get(fw, {}).get("status") == "ok":
                results[fw]["top1_agreement"] = top1_agreement(model, m, top1_batch, top1_samples, items)
                say(cfg, f"{name} {fw}: top-1 agreement with eager fp32 {results[fw]['top1_agreement']}")
    return {"name": name, "params": params, "results": results}


# Static INT8 of the transformer encoders: SmoothQuant (alpha 0.85) with minmax. One
# activation scale per layer cannot serve their few outlier channels otherwise
# (all-MiniLM-L6-v2, real text: min cosine 0.859 with percentile, 0.969 minmax, 0.992 this;
# docs/benchmarks/README.md, 2026-11-26).
ENCODER_STATIC = {"method": "minmax", "smooth": 0.85}


def token_batches(b, s, lo, hi, samples=100):
    """The calibration of the encoders: `samples` random sequences of ids in [lo, hi) in
    batches of the timed input's shape (ONNX Runtime's exported model takes no other)."""
    g = torch.Generator().manual_seed(7)
    return [(torch.randint(lo, hi, (b, s), generator=g), torch.ones(b, s, dtype=torch.long))
            for _ in range(max(1, samples // b))]


def bert_base(cfg):
    import transformers

    b, s = cfg.batch, cfg.seq
    return model_workload(
        cfg, "bert-base", {"batch": b, "seq": s, "dtype": "fp32", "weights": "random init, seed 0"},
        lambda: transformers.BertModel(transformers.BertConfig()),
        lambda: (torch.randint(0, 30000, (b, s)), torch.ones(b, s, dtype=torch.long)), b, quantizable=True,
        calibration=token_batches(b, s, 0, 30000), static_options=ENCODER_STATIC, transformer=True)


_MEMORY_PROBE = """
import json, sys, time
import torch, transformers
fw, batch, seq, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = transformers.BertModel(transformers.BertConfig()).eval()
ids, mask = torch.randint(0, 30000, (batch, seq)), torch.ones(batch, seq, dtype=torch.long)
with torch.no_grad():
    ref = model(ids, mask).last_hidden_state
    def rss():  # this process's peak RSS (VmHWM; ru_maxrss would carry the parent's over exec)
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
    loaded = rss()
    if fw == "eager":
        fn = model
    else:
        if fw == "zenith":
            import zenith  # noqa: F401  (registers the backend)
        fn = torch.compile(model, backend=fw)
    t = time.perf_counter()
    out = fn(ids, mask).last_hidden_state
    first = time.perf_counter() - t
    for _ in range(2):
        out = fn(ids, mask).last_hidden_state
print(json.dumps({"peak_rss_mib": rss(), "after_load_mib": loaded, "first_call_s": first,
                  "max_abs_err": (out - ref).abs().max().item()}))
"""


def bert_memory(cfg):
    """Peak process memory (VmHWM) of BERT-base inference, each contestant in a
    process of its own: the same model (random init, seed 0) built, run eagerly once
    for a reference, then compiled and called three times. Peak RSS includes the
    model's construction, which is the same in every process. The first call's time
    is the cold start in a fresh process (Dynamo's first use included, which in the
    interleaved workloads only the first compiled contestant pays), with an empty
    Inductor cache of its own unless the run keeps the user's warm cache."""
    b, s = cfg.batch, cfg.seq
    rows = {}
    for fw in cfg.frameworks:
        if fw not in ("eager", "inductor", "zenith"):
            continue
        say(cfg, f"bert-base-memory: {fw} in its own process")
        env = {"HF_HUB_OFFLINE": "1"}
        with contextlib.ExitStack() as stack:
            if cfg.empty_inductor_cache:
                # The in-process workloads have filled this run's cache; a first call that
                # finds BERT's kernels there would not be a cold start.
                env["TORCHINDUCTOR_CACHE_DIR"] = stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="zenith-bench-probe-inductor-", ignore_cleanup_errors=True))
            rows[fw] = run_probe(_MEMORY_PROBE, (fw, b, s, cfg.threads), **env)
    eager = rows.get("eager", {}).get("peak_rss_mib")
    for r in rows.values():
        if eager and "peak_rss_mib" in r:
            r["vs_eager"] = r["peak_rss_mib"] / eager
    return {"name": "bert-base-memory", "params": {"batch": b, "seq": s, "dtype": "fp32"},
            "results": {}, "memory": rows}


def minilm(cfg):
    from zenith.demo import load_minilm

    tok, model = load_minilm()
    b, s = cfg.batch, cfg.seq
    ids = torch.randint(1000, 20000, (b, s))
    return model_workload(cfg, "minilm", {"batch": b, "seq": s, "dtype": "fp32", "weights": "all-MiniLM-L6-v2 (real)"},
                          lambda: model, lambda: (ids, torch.ones_like(ids)), b, quantizable=True,
                          calibration=token_batches(b, s, 1000, 20000), static_options=ENCODER_STATIC,
                          transformer=True)


def resnet50(cfg):
    import torchvision

    b = cfg.batch

    def images(seed, n=b):
        return (torch.randn(n, 3, 224, 224, generator=torch.Generator().manual_seed(seed)),)

    return model_workload(cfg, "resnet50", {"batch": b, "image": 224, "dtype": "fp32", "weights": "random init"},
                          lambda: torchvision.models.resnet50(), lambda: (torch.randn(b, 3, 224, 224),), b,
                          quantizable=True, calibration=[images(100 + i) for i in range(max(1, 32 // b))],
                          top1_batch=images)


def mobilenet_v2(cfg):
    """MobileNet V2 (random init, batch-norm statistics calibrated on random batches so
    activations keep their scale): depthwise 3x3 convolutions and ReLU6."""
    import torchvision

    b = cfg.batch

    def build():
        torch.manual_seed(0)
        m = torchvision.models.mobilenet_v2().train()
        with torch.no_grad():
            for _ in range(2):
                m(torch.randn(4, 3, 224, 224))
        return m.eval()

    return model_workload(cfg, "mobilenet-v2", {"batch": b, "image": 224, "dtype": "fp32", "weights": "random init"},
                           build, lambda: (torch.randn(b, 3, 224, 224),), b)


def small_mlp(cfg):
    """Per-call overhead: a 2-layer MLP (256 -> 256 -> 256, GELU) on one row, a few
    microseconds of arithmetic, so the time is mostly each contestant's fixed cost per
    call (Dynamo's guards and wrappers for inductor and zenith)."""
    b = cfg.batch
    return model_workload(
        cfg, "small-mlp", {"batch": b, "features": 256, "weights": "random init, seed 0"},
        lambda: torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256)),
        lambda: (torch.randn(b, 256),), b)
