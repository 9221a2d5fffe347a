"""Every torchvision model (and a set of HF architectures), random init, through
torch.compile(backend="zenith") against eager: the largest difference relative to the
output's scale, what fell back to PyTorch, and any error. One subprocess per model, so a
crash is a finding of its own.

  python model_sweep.py [--only NAME,...] [--timeout S] > sweep.txt   (the driver)
  python model_sweep.py --one NAME                                      (one model)
"""
import argparse
import json
import os
import subprocess
import sys
import time

HUGE = {"regnet_y_128gf", "vit_h_14", "vit_l_16", "vit_l_32", "regnet_y_32gf", "regnet_x_32gf", "efficientnet_b7",
        "efficientnet_b6", "efficientnet_v2_l", "swin_v2_b", "swin_b", "convnext_large", "resnext101_64x4d"}
AT_224 = ("vit_", "swin", "maxvit")

HF = {
    "hf_distilbert": ("DistilBertConfig", "DistilBertModel", "ids"),
    "hf_roberta": ("RobertaConfig", "RobertaModel", "ids"),
    "hf_albert": ("AlbertConfig", "AlbertModel", "ids"),
    "hf_electra": ("ElectraConfig", "ElectraModel", "ids"),
    "hf_deberta_v2": ("DebertaV2Config", "DebertaV2Model", "ids"),
    "hf_t5_encoder": ("T5Config", "T5EncoderModel", "ids"),
    "hf_bart": ("BartConfig", "BartModel", "ids"),
    "hf_opt": ("OPTConfig", "OPTModel", "ids"),
    "hf_gpt_neox": ("GPTNeoXConfig", "GPTNeoXModel", "ids"),
    "hf_bloom": ("BloomConfig", "BloomModel", "ids"),
    "hf_phi": ("PhiConfig", "PhiModel", "ids"),
    "hf_qwen2": ("Qwen2Config", "Qwen2Model", "ids"),
    "hf_mistral": ("MistralConfig", "MistralModel", "ids"),
    "hf_gemma": ("GemmaConfig", "GemmaModel", "ids"),
    "hf_vit": ("ViTConfig", "ViTModel", "pixels"),
    "hf_convnext": ("ConvNextConfig", "ConvNextModel", "pixels"),
    "hf_swin": ("SwinConfig", "SwinModel", "pixels"),
    "hf_whisper_encoder": ("WhisperConfig", "WhisperEncoder", "mel"),
    "hf_wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", "audio"),
    "hf_clip_text": ("CLIPTextConfig", "CLIPTextModel", "ids"),
}
SMALL_LM = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=1000)


def build(name):
    import torch
    import torchvision

    if name in HF:
        import transformers

        cfg_name, model_name, kind = HF[name]
        cfg = getattr(transformers, cfg_name)()
        if name in ("hf_mistral", "hf_qwen2", "hf_gemma", "hf_phi", "hf_gpt_neox"):  # 7B-20B defaults: shrink
            for k, v in SMALL_LM.items():
                if hasattr(cfg, k):
                    setattr(cfg, k, v)
            if name == "hf_gemma":
                cfg.head_dim = 64
        if name == "hf_whisper_encoder":
            from transformers.models.whisper.modeling_whisper import WhisperEncoder

            m = WhisperEncoder(cfg)
        else:
            m = getattr(transformers, model_name)(cfg)
        g = torch.Generator().manual_seed(1)
        if kind == "ids":
            x = (torch.randint(0, min(cfg.vocab_size, 1000), (1, 32), generator=g),)
            if name == "hf_bart":
                return m, x, dict(decoder_input_ids=x[0][:, :8])
        elif kind == "pixels":
            x = (torch.randn(1, 3, 224, 224, generator=g),)
        elif kind == "mel":
            x = (torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g),)
        else:
            x = (torch.randn(1, 16000, generator=g),)
        return m, x, {}
    if name.startswith("seg_"):
        m = getattr(torchvision.models.segmentation, name[4:])(weights=None, weights_backbone=None)
        return m, (torch.randn(1, 3, 128, 128, generator=torch.Generator().manual_seed(1)),), {}
    if name.startswith("video_"):
        m = getattr(torchvision.models.video, name[6:])()
        return m, (torch.randn(1, 3, 8, 64, 64, generator=torch.Generator().manual_seed(1)),), {}
    kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    m = getattr(torchvision.models, name)(**kw)
    side = 224 if name.startswith(AT_224) else (160 if name == "inception_v3" else 128)
    return m, (torch.randn(1, 3, side, side, generator=torch.Generator().manual_seed(1)),), {}


def perturb(m):
    """Random init leaves some outputs degenerate (ViT's zero head, constant batch-norm
    statistics, EfficientNet's features at 1e-14): every parameter and batch-norm statistic
    gets noise of its own scale, so each layer's arithmetic shows in the output."""
    import torch

    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in m.parameters():
            if p.is_floating_point() and p.numel():
                s = p.std().item() if p.numel() > 1 else 0.0
                p.add_(torch.randn(p.shape, generator=g) * (0.1 * s if s > 1e-6 else 0.02))
        for mod in m.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and mod.running_mean is not None:
                mod.running_mean.add_(0.1 * torch.randn(mod.running_mean.shape, generator=g))
                mod.running_var.mul_(0.5 + torch.rand(mod.running_var.shape, generator=g))


def flat(o):
    import torch

    if isinstance(o, torch.Tensor):
        return [o]
    if isinstance(o, dict) or hasattr(o, "to_tuple"):
        o = list(o.values()) if isinstance(o, dict) else list(o.to_tuple())
    if isinstance(o, (list, tuple)):
        return [t for x in o for t in flat(x)]
    return []


def one(name):
    import torch

    import zenith
    from zenith import backend as zb

    torch.manual_seed(0)
    m, x, kw = build(name)
    m.eval()
    if os.environ.get("SWEEP_PERTURB", "1") == "1":
        perturb(m)
    r = {"model": name}
    with torch.no_grad():
        ref = flat(m(*x, **kw))
        t0 = time.perf_counter()
        with zb.collect_reports() as sink:
            c = torch.compile(m, backend="zenith")
            out = flat(c(*x, **kw))
        r["compile_s"] = round(time.perf_counter() - t0, 2)
        out2 = flat(c(*x, **kw))  # a second call: the compiled path again, no recompiles expected
    errs = []
    for a, b in zip(ref, out):
        if a.shape != b.shape or a.dtype != b.dtype:
            errs.append(f"shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}")
            continue
        if not a.is_floating_point():
            if not torch.equal(a, b):
                errs.append("integer output differs")
            continue
        fin = torch.isfinite(a)
        if not torch.equal(fin, torch.isfinite(b)):
            errs.append("non-finite positions differ")
        scale = a[fin].abs().max().item() if fin.any() else 1.0
        d = (a[fin] - b[fin]).abs().max().item() if fin.any() else 0.0
        r.setdefault("rel_err", []).append(d / max(scale, 1e-6))
    r["outputs"] = len(ref)
    if len(ref) != len(out):
        errs.append(f"{len(ref)} outputs vs {len(out)}")
    if any(not torch.equal(a, b) for a, b in zip(out, out2)):
        errs.append("second call differs from the first")
    r["max_rel_err"] = max(r.pop("rel_err", [0.0]))
    r["errors"] = errs
    nodes = sum(g.nodes_total for g in sink)
    native = sum(g.nodes_native for g in sink)
    fb = {}
    for g in sink:
        for k, e in g.fallback_ops.items():
            fb[k] = fb.get(k, 0) + e["count"]
    r.update(graphs=len(sink), nodes=nodes, native=native, fallbacks=fb)
    print(json.dumps(r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--one")
    ap.add_argument("--only")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    if a.one:
        return one(a.one)
    import torchvision

    names = [n for n in torchvision.models.list_models(module=torchvision.models) if n not in HUGE]
    names += ["seg_fcn_resnet50", "seg_deeplabv3_mobilenet_v3_large", "seg_lraspp_mobilenet_v3_large", "video_r3d_18"]
    names += list(HF)
    if a.only:
        names = a.only.split(",")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    for n in names:
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, __file__, "--one", n], capture_output=True, text=True,
                               timeout=a.timeout, env=env)
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            if p.returncode == 0 and line:
                print(line[-1], flush=True)
            else:
                tail = (p.stderr.strip().splitlines() or ["?"])[-1][:300]
                print(json.dumps({"model": n, "crash": p.returncode, "stderr": tail}), flush=True)
        except subprocess.TimeoutExpired:
            print(json.dumps({"model": n, "timeout": a.timeout}), flush=True)
        print(f"# {n} {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
