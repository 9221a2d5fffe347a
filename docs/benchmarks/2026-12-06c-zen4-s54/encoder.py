# The encoders this folder's scripts time: random init, BERT-base's or all-MiniLM-L6-v2's config, seq 128,
# quantized by `scheme` (fp32: as made; int8-static: calibrated on 4 random batches as the bench does).
import torch, transformers, zenith


def encoder(name, scheme):
    """(model, ids): the model in eval mode, quantized in place unless scheme is fp32."""
    torch.manual_seed(0); torch.set_num_threads(2)
    cfg = (transformers.BertConfig() if name == "bert" else
           transformers.BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536))
    m = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128))
    if scheme == "int8-static":
        cal = [(torch.randint(0, cfg.vocab_size, (1, 128)),) for _ in range(4)]
        zenith.quantize(m, scheme, calibration=cal, method="minmax", smooth=0.85)
    elif scheme != "fp32":
        zenith.quantize(m, scheme)
    return m, ids
