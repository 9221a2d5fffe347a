"""zenith.export over a zoo (random init, batch 1): each model written, loaded and checked
against eager (export's own check: 1e-3 of the output's scale), or the refusal printed.
GPT-2 and Llama take kwargs={"use_cache": False} (a DynamicCache output does not export)."""
import torch, torchvision, transformers, zenith, time, traceback
torch.manual_seed(0)
cases = []
for n in ["resnet50", "mobilenet_v3_small", "vit_b_16", "efficientnet_b0", "convnext_tiny", "densenet121", "squeezenet1_0", "shufflenet_v2_x0_5", "regnet_y_400mf", "googlenet", "inception_v3"]:
    size = 299 if n == "inception_v3" else 224
    kw = {"aux_logits": False, "init_weights": False} if n in ("googlenet", "inception_v3") else {}
    cases.append((n, lambda n=n, kw=kw: getattr(torchvision.models, n)(**kw).eval(), (torch.randn(1, 3, size, size),)))
def hf(cls, cfg):
    return lambda: cls(cfg).eval()
ids = torch.randint(0, 1000, (1, 32))
cases += [
 ("gpt2", hf(transformers.GPT2LMHeadModel, transformers.GPT2Config(n_layer=2, vocab_size=1000)), (ids,)),
 ("llama", hf(transformers.LlamaForCausalLM, transformers.LlamaConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=8, num_key_value_heads=4, intermediate_size=512, vocab_size=1000)), (ids,)),
 ("t5enc", hf(transformers.T5EncoderModel, transformers.T5Config(num_layers=2, d_model=128, d_ff=256, num_heads=4, vocab_size=1000)), (ids,)),
 ("distilbert", hf(transformers.DistilBertModel, transformers.DistilBertConfig(n_layers=2, vocab_size=1000)), (ids,)),
]
for name, make, args in cases:
    try:
        m = make()
        t0 = time.perf_counter()
        kw = {"use_cache": False} if name in ("gpt2", "llama") else None
        zenith.export(m, args, "/tmp/zoo.zenith", kwargs=kw)
        print(f"OK   {name} {time.perf_counter()-t0:.1f}s", flush=True)
    except Exception as e:
        print(f"FAIL {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
