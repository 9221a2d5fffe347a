"""Decoders as model files: one decoding step of a transformers causal LM, its KV cache
passed in and out as plain tensors, so a program with no Python (examples/cpp/generate.cc)
generates text from one file.

    zenith.export_decoder(model, "gemma.zenith")    # model: e.g. zenith.load_gguf(...)[0]

The file's inputs are input_ids [1, new] and, per layer i, past_{2i} (keys) and
past_{2i+1} (values), each [1, kv_heads, past, head_dim]. Its outputs are the logits of
the last position [1, 1, vocab], then the present keys and values in the same order,
[1, kv_heads, past + new, head_dim]. The first call takes the prompt and empty pasts
(past = 0); each later call takes the chosen token and the previous call's presents.
"""
from __future__ import annotations

import inspect

import torch

from zenith.model_file import export


class DecoderStep(torch.nn.Module):
    """One step of `model` (a transformers causal LM): (input_ids, *past) -> (last
    logits, *present), the cache as 2 tensors per layer (see the module docstring)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.layers = _text_config(model).num_hidden_layers
        self.keep = "logits_to_keep" in inspect.signature(model.forward).parameters

    def forward(self, input_ids, *past):
        from transformers import DynamicCache

        if len(past) != 2 * self.layers:
            raise ValueError(f"DecoderStep: takes {2 * self.layers} past tensors (keys and values of "
                             f"{self.layers} layers), got {len(past)}")
        cache = DynamicCache(config=self.model.config)
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        kw = {"logits_to_keep": 1} if self.keep else {}
        out = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True, **kw)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits[:, -1:], *present)


def _text_config(model):
    cfg = model.config
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


def _longest(cfg):
    """The most tokens (past + new) a file may hold, and why: the model's positions, or,
    with sliding-window layers, torch.export's bound on each length (the window less
    4: past the window, transformers' cache drops keys, which a traced step cannot
    follow)."""
    most, why = getattr(cfg, "max_position_embeddings", None) or 1 << 20, "the model's max_position_embeddings"
    window = getattr(cfg, "sliding_window", None)
    sliding = window and ("sliding_attention" in (getattr(cfg, "layer_types", None) or ["sliding_attention"]))
    if sliding and window - 4 < most:
        most, why = window - 4, f"its sliding window of {window} less 4"
    return most, why


def export_decoder(model, path, *, max_length=None, metadata=None, check=True, rtol=None, atol=None):
    """Writes one decoding step of `model` (a transformers causal LM in eval mode,
    float32 or zenith.quantize'd / zenith.load_gguf'd; batch 1) to `path` with symbolic
    lengths: the prompt and every later step run from the one file, up to `max_length`
    tokens in all (default: the most the model allows, see below). The file notes
    "zenith.decoder.max_length", "zenith.decoder.eos" (the end-of-sequence ids,
    comma-separated) and "zenith.decoder.layers". The file bounds each length on its own
    (new <= max_length, past < max_length); keeping past + new <= max_length is the
    calling program's part, as greedy and examples/cpp/generate.cc do: past it, a
    sliding-window model's answers are wrong without an error. Models with sliding-window
    attention (Gemma 3) hold at most their window less 4 tokens (508 of 512). Returns the
    LoadedModel, checked against eager (check=True) as zenith.export checks (rtol, atol),
    or, for a model with quantized layers, by its next token and each output's cosine
    distance to eager's (at most 1e-2; see below); None with check=False."""
    from zenith.freeze import _check_eval

    if not isinstance(model, torch.nn.Module) or getattr(model, "config", None) is None:
        raise TypeError(f"zenith.export_decoder: takes a transformers causal LM, got {type(model).__name__}")
    _check_eval(model)
    floats = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if floats - {torch.float32}:
        raise TypeError(f"zenith.export_decoder: takes float32 models (or zenith-quantized ones), got "
                        f"{', '.join(sorted(str(d) for d in floats))} parameters")
    cfg = _text_config(model)
    for attr in ("num_hidden_layers", "vocab_size"):
        if not hasattr(cfg, attr):
            raise TypeError(f"zenith.export_decoder: takes a transformers causal LM; its config has no {attr}")
    most, why = _longest(cfg)
    max_length = most if max_length is None else int(max_length)
    if not 5 <= max_length <= most:  # (the example below holds 5 tokens)
        raise ValueError(f"zenith.export_decoder: max_length {max_length} is outside 5..{most} ({why})")
    step = DecoderStep(model)
    step.training = False  # (the wrapper only: the model's own modes are the user's, checked above)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    # The example: 2 new tokens after a past of 3 (torch.export fixes sizes 0 and 1 of a
    # symbolic dim), the past the model itself computes for 3 tokens: random keys and
    # values would give attention no real input has, where quantized activations
    # (int8 codes a rounding apart) differ from eager more than the check allows.
    ids = torch.arange(1, 6).reshape(1, 5) % cfg.vocab_size
    with torch.no_grad():
        past = step(ids[:, :3], *[torch.zeros(1, heads, 0, head_dim)] * (2 * step.layers))[1:]
    past = [p.contiguous() for p in past]
    ids = ids[:, 3:]
    new_len = torch.export.Dim("new", min=1, max=max_length)
    past_len = torch.export.Dim("past", min=0, max=max_length - 1)
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(cfg, "eos_token_id", None)
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    notes = {"zenith.decoder.max_length": str(max_length), "zenith.decoder.eos": ",".join(map(str, eos)),
             "zenith.decoder.layers": str(step.layers)}
    shapes = {"input_ids": {1: new_len}, "past": tuple({2: past_len} for _ in past)}
    quantized = any(type(m).__module__ == "zenith.quant.modules" for m in model.modules())
    return export(step, (ids, *past), path, metadata=metadata, check=check, rtol=rtol, atol=atol, _notes=notes,
                  dynamic_shapes=shapes, _compare=_generation_close if quantized else None)


def _generation_close(k, out, ref):
    """export's check of output k for a model with quantized layers: None if the file's
    output does what generation needs, else what differs. Quantized layers quantize their
    input rows to int8 codes, and a code one rounding apart (the file fuses the norms
    before them, reordering float sums) moves what follows by percents: eager's own logits
    move so when its cache changes by 1e-7 (Gemma 3 270M Q4_K_M: by 2.5 where they reach
    25). Element-wise tolerances would have to be that loose; checked instead: the same
    next token (output 0, the logits), and each output as a whole within 1e-2 of eager's
    in cosine distance."""
    if out.shape != ref.shape:
        return f"{list(out.shape)} where eager gives {list(ref.shape)}"
    if k == 0 and int(out.argmax()) != int(ref.argmax()):
        return f"next token {int(out.argmax())}, eager's {int(ref.argmax())}"
    cos = torch.nn.functional.cosine_similarity(out.double().flatten(), ref.double().flatten(), dim=0).item()
    return None if 1 - cos <= 1e-2 else f"cosine {cos:.6f} to eager's"


def greedy(loaded, prompt_ids, max_new_tokens, stop_at_eos=True):
    """Greedy generation from a file export_decoder wrote (a LoadedModel): the token ids
    after `prompt_ids` (a list), stopping at an end-of-sequence id (unless stop_at_eos is
    False), at max_new_tokens or at the file's max_length. What examples/cpp/generate.cc
    does, in Python."""
    meta = loaded.metadata
    if "zenith.decoder.max_length" not in meta:
        raise ValueError("zenith.decoder.greedy: the file has no zenith.decoder.max_length (export_decoder writes them)")
    eos = {int(t) for t in meta.get("zenith.decoder.eos", "").split(",") if t}
    limit = int(meta["zenith.decoder.max_length"])
    if not 1 <= len(prompt_ids) <= limit:
        raise ValueError(f"zenith.decoder.greedy: the prompt has {len(prompt_ids)} tokens; the file holds 1 to {limit}")
    past = [torch.zeros([0 if isinstance(d, str) else d for d in shape], dtype=dtype)
            for _, dtype, shape in loaded.inputs[1:]]
    ids, out = list(prompt_ids), []
    step = torch.tensor([ids])
    while len(out) < max_new_tokens and len(ids) <= limit:  # (a call holds len(ids) tokens)
        logits, *past = loaded(step, *past)
        token = int(logits[0, -1].argmax())
        out.append(token)
        ids.append(token)
        if stop_at_eos and token in eos:
            break
        step = torch.tensor([[token]])
    return out
