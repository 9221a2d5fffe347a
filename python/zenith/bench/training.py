"""Training workloads: optimizer steps interleaved between contestants, each on its
own copy of the same initial weights and the same batches, with loss curves checked
against eager's."""
from __future__ import annotations

import copy

import torch

from zenith.backend import collect_reports
from zenith.bench.contestants import compiled, peer_status
from zenith.bench.runner import note_zenith, run_interleaved, say


def lm_batches(vocab, batch, seq, steps, seed=0):
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


def train(cfg, name, params, make_model, trainable, batches):
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
        st = peer_status(fw)
        if st:
            results[fw] = st
            continue
        model = copy.deepcopy(base).train()
        fwd = compiled(fw, model)
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
    say(cfg, f"{name}: {', '.join(fns)}")
    # Warm-up steps would shift one curve against another; every framework takes the
    # same number of steps, and agreement is checked on the full curves at the end.
    sub = copy.copy(cfg)
    sub.warmup, sub.iterations = 1, max(1, cfg.steps - 2)  # cold + warm-up + timed = cfg.steps
    with collect_reports() as reports:
        results.update(run_interleaved(sub, fns, lambda fw, out: {}))
    note_zenith(results, reports)
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
    return train(cfg, "train-transformer-43m",
                  {"model": "GPT-2 architecture, 6 layers x 768, vocab 1024, random init", "batch": b, "seq": s,
                   "dtype": "fp32"}, make, lambda m: m.parameters(), lm_batches(1024, b, s, cfg.steps))


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
    return train(cfg, "train-lora",
                  {"model": "TinyLlama-1.1B config reduced to 2 layers, random init, peft LoRA r=8 alpha=32 on "
                   "q/k/v/o", "batch": b, "seq": s, "dtype": "fp32"},
                  make, lambda m: m.parameters(), lm_batches(32000, b, s, cfg.steps, seed=1))
