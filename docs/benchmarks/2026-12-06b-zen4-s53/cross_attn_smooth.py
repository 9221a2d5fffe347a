"""Static INT8 with SmoothQuant on an encoder-decoder (BART, random init, real config
shapes scaled down): does one divisor shared by every decoder layer's cross-attention K
and V (they all read the encoder's output tensor, so calibration groups them) cost
accuracy against a divisor per layer, or per attention block (K and V of one layer)?
Eager forward of the quantized model (zenith.quant's ops), logits against fp32 on
held-out inputs. Usage: python cross_attn_smooth.py [layers] [d_model] [skew]"""
import copy
import sys

import torch
import transformers

import zenith
from zenith.quant import calibrate as cal

layers = int(sys.argv[1]) if len(sys.argv) > 1 else 6
d = int(sys.argv[2]) if len(sys.argv) > 2 else 512
torch.manual_seed(0)
cfg = transformers.BartConfig(vocab_size=2000, d_model=d, encoder_layers=layers, decoder_layers=layers,
                              encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=4 * d,
                              decoder_ffn_dim=4 * d, max_position_embeddings=256)
base = transformers.BartForConditionalGeneration(cfg).eval()
# Trained-like activations: outlier channels in the embeddings (SmoothQuant's premise).
with torch.no_grad():
    base.model.shared.weight[:, :8] *= 8
    # With "skew": each decoder layer's cross-attention K and V weights get outlier input
    # columns of their own (trained layers differ in which channels they weigh most).
    if "skew" in sys.argv:
        for i, layer in enumerate(base.model.decoder.layers):
            for lin in (layer.encoder_attn.k_proj, layer.encoder_attn.v_proj):
                lin.weight[:, 16 * i + 8:16 * i + 24] *= 10


def batch(seed):
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(4, 2000, (2, 64), generator=g),
            "decoder_input_ids": torch.randint(4, 2000, (2, 32), generator=g)}


calib = [batch(s) for s in range(8)]
held = [batch(100 + s) for s in range(8)]
with torch.no_grad():
    ref = [base(**b).logits for b in held]

orig_observe = cal.observe


def observe_with(mode):
    def observe(model, modules, samples, channels=(), multipliers=None, first_inputs=None):
        out = orig_observe(model, modules, samples, channels, multipliers, first_inputs)
        if first_inputs is not None and mode != "shared":
            for name in list(first_inputs):
                first_inputs[name] = (first_inputs[name], name if mode == "layer" else name.rsplit(".", 2)[0])
        return out
    return observe


for mode in ("shared", "block", "layer"):
    cal.observe = observe_with(mode)
    m = copy.deepcopy(base)
    zenith.quantize(m, "int8-static", calibration=calib, method="minmax", smooth=0.85)
    cal.observe = orig_observe
    xs = {}
    for name, mod in m.named_modules():
        if getattr(mod, "x_smooth", None) is not None:
            xs.setdefault(id(mod.x_smooth), []).append(name)
    biggest = max(len(v) for v in xs.values())
    with torch.no_grad():
        outs = [m(**b).logits for b in held]
    rel = torch.stack([(o - r).norm() / r.norm() for o, r in zip(outs, ref)])
    cos = torch.cat([torch.nn.functional.cosine_similarity(o.flatten(1), r.flatten(1)) for o, r in zip(outs, ref)])
    agree = torch.cat([(o.argmax(-1) == r.argmax(-1)).float().flatten() for o, r in zip(outs, ref)]).mean()
    print(f"{mode:7s} divisors {len(xs):3d} (largest group {biggest:2d} layers): rel err mean {rel.mean():.4f} "
          f"max {rel.max():.4f}, cosine min {cos.min():.5f}, top-1 agreement {agree:.4f}")
