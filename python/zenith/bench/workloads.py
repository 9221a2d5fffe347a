"""Benchmark workloads. Each takes a Config and returns {"name", "params", "results"}
with one entry per requested framework: samples from interleaved runs, latency
summary, cold start, and agreement with eager checked in the same run."""
from __future__ import annotations

import copy
import importlib.util
import time
from dataclasses import dataclass, field

import torch

import zenith
from zenith.bench import stats

ALL_FRAMEWORKS = ("eager", "inductor", "zenith", "onnxruntime", "openvino", "llamacpp")
PEER_PACKAGES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "llamacpp": "llama_cpp"}


@dataclass
class Config:
    frameworks: tuple = ("eager", "inductor", "zenith")
    threads: int = 2
    iterations: int = 20
    warmup: int = 3
    batch: int = 1
    seq: int = 128
    new_tokens: int = 32
    progress: object = None  # callable(str) for progress lines
    extra: dict = field(default_factory=dict)


def _say(cfg, msg):
    if cfg.progress:
        cfg.progress(msg)


def _skip(reason):
    return {"status": "skipped", "reason": reason}


def _fail(e):
    return {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}


def _flat(out):
    if isinstance(out, torch.Tensor):
        return out.detach().float().reshape(-1)
    if hasattr(out, "last_hidden_state"):
        return _flat(out.last_hidden_state)
    if hasattr(out, "logits"):
        return _flat(out.logits)
    if isinstance(out, (list, tuple)):
        return torch.cat([_flat(o) for o in out])
    raise TypeError(f"cannot compare output of type {type(out).__name__}")


def agreement(ref, got):
    a, b = _flat(ref), _flat(got)
    d = (a - b).abs()
    scale = a.abs().max().clamp(min=1e-30)
    cos = torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=0).item()
    return {"max_abs_err": d.max().item(), "max_rel_err": (d.max() / scale).item(), "cosine": cos}


def _peer_status(fw):
    if fw in PEER_PACKAGES and importlib.util.find_spec(PEER_PACKAGES[fw]) is None:
        return _skip(f"package '{PEER_PACKAGES[fw]}' is not installed")
    if fw in PEER_PACKAGES:
        return _skip(f"the {fw} contestant is not implemented in this workload yet")
    return None


def run_interleaved(cfg, fns, check):
    """fns: framework -> zero-arg callable (first call compiles). Cold start is the
    first call alone; then warm-up; then `iterations` rounds, order rotating each
    round. check(framework, output) -> agreement dict."""
    results, alive, outputs = {}, {}, {}
    for fw, fn in fns.items():
        try:
            t = time.perf_counter()
            out = fn()
            cold = time.perf_counter() - t
            outputs[fw] = out
            results[fw] = {"status": "ok", "cold_start_s": cold, "samples_s": []}
            alive[fw] = fn
        except Exception as e:  # a failing contestant is reported; the run goes on
            results[fw] = _fail(e)
    for fw in list(alive):
        try:
            results[fw]["agreement"] = check(fw, outputs[fw])
        except Exception as e:
            results[fw] = _fail(e)
            del alive[fw]
    for _ in range(cfg.warmup):
        for fn in alive.values():
            fn()
    names = list(alive)
    for i in range(cfg.iterations):
        order = names[i % len(names):] + names[: i % len(names)] if names else []
        for fw in order:
            t = time.perf_counter()
            alive[fw]()
            results[fw]["samples_s"].append(time.perf_counter() - t)
    for fw in names:
        r = results[fw]
        r["latency"] = stats.summary(r["samples_s"])
        r["compile_s_estimate"] = max(0.0, r["cold_start_s"] - r["latency"]["median"])
    if "eager" in alive:
        base = results["eager"]["samples_s"]
        for fw in names:
            ratio, lo, hi = stats.paired_ratio_ci(base, results[fw]["samples_s"])
            results[fw]["ratio_vs_eager"] = {"median": ratio, "ci_lo": lo, "ci_hi": hi,
                                             "verdict": stats.verdict(ratio, lo, hi)}
    return results


def _compiled(fw, model, dynamic=None):
    if fw == "eager":
        return model
    if fw == "inductor":
        return torch.compile(model, dynamic=dynamic)
    if fw == "zenith":
        return zenith.compile(model, dynamic=dynamic)
    raise ValueError(fw)


def _model_workload(cfg, name, params, make_model, make_inputs, items):
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    model = make_model().eval()
    inputs = make_inputs()
    with torch.inference_mode():
        ref = model(*inputs)
    fns, results = {}, {}
    for fw in cfg.frameworks:
        st = _peer_status(fw)
        if st:
            results[fw] = st
            continue
        m = _compiled(fw, model)
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
    before = zenith.stats()
    _say(cfg, f"{name}: {', '.join(fns)}")
    results.update(run_interleaved(cfg, fns, lambda fw, out: agreement(ref, out)))
    after = zenith.stats()
    if results.get("zenith", {}).get("status") == "ok":
        results["zenith"]["nodes_native"] = after["nodes_native"] - before["nodes_native"]
        results["zenith"]["nodes_fallback"] = after["nodes_fallback"] - before["nodes_fallback"]
    for r in results.values():
        if r.get("status") == "ok":
            r["throughput_items_s"] = items / r["latency"]["median"]
    return {"name": name, "params": params, "results": results}


def bert_base(cfg):
    import transformers

    b, s = cfg.batch, cfg.seq
    return _model_workload(
        cfg, "bert-base", {"batch": b, "seq": s, "dtype": "fp32", "weights": "random init, seed 0"},
        lambda: transformers.BertModel(transformers.BertConfig()),
        lambda: (torch.randint(0, 30000, (b, s)), torch.ones(b, s, dtype=torch.long)), b)


def minilm(cfg):
    from zenith.demo import load_minilm

    tok, model = load_minilm()
    b, s = cfg.batch, cfg.seq
    ids = torch.randint(1000, 20000, (b, s))
    return _model_workload(cfg, f"minilm-seq{s}", {"batch": b, "seq": s, "dtype": "fp32",
                                                  "weights": "all-MiniLM-L6-v2 (real)"},
                           lambda: model, lambda: (ids, torch.ones_like(ids)), b)


def resnet50(cfg):
    import torchvision

    b = cfg.batch
    return _model_workload(cfg, "resnet50", {"batch": b, "image": 224, "dtype": "fp32", "weights": "random init"},
                           lambda: torchvision.models.resnet50(), lambda: (torch.randn(b, 3, 224, 224),), b)


def _decode(cfg, name, params, make_model, prompt_len, vocab):
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    base = make_model().eval()
    ids = torch.randint(0, vocab, (1, prompt_len))
    n = cfg.new_tokens
    gen_kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    with torch.inference_mode():
        ref = base.generate(ids, **gen_kw)
    fns, results, models = {}, {}, {}
    for fw in cfg.frameworks:
        st = _peer_status(fw)
        if st:
            results[fw] = st
            continue
        m = base if fw == "eager" else copy.deepcopy(base)
        if fw != "eager":
            m.forward = _compiled(fw, m.forward)
        models[fw] = m

        def fn(m=m, fw=fw):
            ctx = torch.inference_mode() if fw == "eager" else torch.no_grad()
            with ctx:
                return m.generate(ids, **gen_kw)
        fns[fw] = fn
    torch._dynamo.reset()
    _say(cfg, f"{name}: {', '.join(fns)}")

    def check(fw, out):
        new_ref, new_out = ref[0, prompt_len:], out[0, prompt_len:]
        return {"token_agreement": (new_ref == new_out).float().mean().item(),
                "tokens_equal": bool(torch.equal(ref, out))}

    results.update(run_interleaved(cfg, fns, check))
    for fw, r in results.items():
        if r.get("status") == "ok":
            r["decode_tokens_s"] = n / r["latency"]["median"]
            with torch.no_grad():  # time to first token: a one-token generation, warm
                t = time.perf_counter()
                models[fw].generate(ids, **dict(gen_kw, max_new_tokens=1, min_new_tokens=1))
                r["time_to_first_token_s"] = time.perf_counter() - t
    params = dict(params, prompt=prompt_len, new_tokens=n, decoding="greedy", batch=1)
    return {"name": name, "params": params, "results": results}


def gpt2_decode(cfg):
    import transformers

    return _decode(cfg, "gpt2-decode", {"model": "GPT-2 small config, random init", "dtype": "fp32"},
                   lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config()), 16, 50257)


def tinyllama_decode(cfg):
    import transformers

    c = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                                 num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                 max_position_embeddings=2048)
    return _decode(cfg, "tinyllama-decode", {"model": "TinyLlama-1.1B config, random init", "dtype": "fp32"},
                   lambda: transformers.LlamaForCausalLM(c), 16, 32000)


GEMM_SHAPES = [(1, 768, 768), (1, 3072, 768), (4, 768, 3072), (16, 768, 768), (64, 1024, 1024), (128, 768, 3072),
               (128, 3072, 768), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048)]


def gemm_sweep(cfg):
    from zenith import _C

    torch.set_num_threads(cfg.threads)
    rows = []
    for (m, n, k) in cfg.extra.get("gemm_shapes", GEMM_SHAPES):
        g = _C.Graph()
        a = g.add_input("a", "f32", [m, k])
        b = g.add_input("b", "f32", [k, n])
        g.set_outputs(g.add_node("matmul", [a, b]))
        exe = _C.Executable(g)
        A, B = torch.randn(m, k), torch.randn(k, n)
        ref = torch.mm(A, B)
        _C.set_num_threads(cfg.threads)
        fns = {"torch.mm": lambda: torch.mm(A, B), "zenith": lambda: exe.run([A, B])[0]}
        iters = max(5, min(cfg.iterations, int(2e10 / (2 * m * n * k))))
        sub = Config(iterations=iters, warmup=2, threads=cfg.threads)
        res = run_interleaved(sub, fns, lambda fw, out: agreement(ref, out))
        flops = 2 * m * n * k
        for r in res.values():
            if r["status"] == "ok":
                r["gflops"] = flops / r["latency"]["median"] / 1e9
        if all(r["status"] == "ok" for r in res.values()):
            ratio, lo, hi = stats.paired_ratio_ci(res["zenith"]["samples_s"], res["torch.mm"]["samples_s"])
            res["zenith"]["throughput_ratio_vs_torch"] = {"median": ratio, "ci_lo": lo, "ci_hi": hi}
        rows.append({"m": m, "n": n, "k": k, "results": res})
        _say(cfg, f"gemm {m}x{n}x{k}: zenith {res['zenith'].get('gflops', 0):.1f} GFLOP/s, "
                  f"torch.mm {res['torch.mm'].get('gflops', 0):.1f}")
    return {"name": "gemm-sweep", "params": {"dtype": "fp32", "shapes": len(rows)},
            "results": {"zenith": {"status": "skipped", "reason": "see rows"}}, "rows": rows}


def machine(cfg):
    """Peak single-precision GEMM (torch.mm, large square) and memory bandwidth (copy)."""
    torch.set_num_threads(cfg.threads)
    n = 2048
    A, B = torch.randn(n, n), torch.randn(n, n)
    torch.mm(A, B)
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        torch.mm(A, B)
        best = max(best, 2 * n ** 3 / (time.perf_counter() - t) / 1e9)
    src = torch.empty(64 * 2 ** 20, dtype=torch.float32).fill_(1.0)  # 256 MiB
    dst = torch.empty_like(src)
    dst.copy_(src)
    bw = 0.0
    for _ in range(5):
        t = time.perf_counter()
        dst.copy_(src)
        bw = max(bw, 2 * src.numel() * 4 / (time.perf_counter() - t) / 1e9)  # read + write
    return {"name": "machine", "params": {"gemm_n": n, "copy_mib": 256},
            "results": {}, "peak_sgemm_gflops": best, "memory_bandwidth_gbs": bw}


def not_implemented(name):
    def run(cfg):
        return {"name": name, "params": {},
                "results": {fw: _skip("workload not implemented yet") for fw in cfg.frameworks}}
    return run


WORKLOADS = {
    "machine": machine,
    "gemm-sweep": gemm_sweep,
    "bert-base": bert_base,
    "minilm": minilm,
    "resnet50": resnet50,
    "gpt2-decode": gpt2_decode,
    "tinyllama-decode": tinyllama_decode,
    "gemma3-270m-decode": not_implemented("gemma3-270m-decode"),
    "train-transformer-43m": not_implemented("train-transformer-43m"),
    "train-lora": not_implemented("train-lora"),
}
