"""zenith.quantize on an MLP and on small random-init GPT-2 / Llama models: compiled with
Zenith against the same quantized model in eager (tight: rtol 1e-4, atol 1e-5, the
model tests' tolerance) and against the fp32 model (loose, per scheme: what the format
loses); which layers it converts, keeps and why; its errors."""
import copy
import warnings

import pytest
import torch

import zenith
from quant_util import assert_same_model_close
from zenith.quant import QEmbedding, QLinear, summary

transformers = pytest.importorskip("transformers")


# scheme, options, the formats they give, and the loose bounds against fp32: cosine of the
# outputs at least this, largest error at most this fraction of the largest output
SCHEMES = [
    ("int8", {}, "int8", 0.999, 0.03),
    ("int4", {}, "q4_0", 0.95, 0.35),
    ("int4", {"symmetric": False}, "q4_1", 0.95, 0.35),
    ("int4", {"group_size": 64}, "int4_g64", 0.95, 0.35),
    ("int4", {"group_size": 64, "symmetric": False}, "uint4_g64", 0.95, 0.35),
    ("int4", {"group_size": 128}, "int4_g128", 0.95, 0.35),
    ("int4", {"group_size": 128, "symmetric": False}, "uint4_g128", 0.95, 0.35),
    ("nf4", {}, "nf4", 0.95, 0.35),
]
IDS = [f"{s}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" if kw else s for s, kw, *_ in SCHEMES]


def loose_close(got, want, cos_min, err_max):
    cos = torch.nn.functional.cosine_similarity(got.flatten(), want.flatten(), dim=0).item()
    err = ((got - want).abs().max() / want.abs().max()).item()
    assert cos >= cos_min and err <= err_max, (cos, err)


def quantized(model, scheme, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # layers kept in fp32 are checked where that is the point
        return zenith.quantize(copy.deepcopy(model), scheme, **kw)


def compiled_vs_eager(model, *inputs, pick=lambda o: o):
    compiled = torch.compile(model, backend="zenith")
    with torch.no_grad():
        want = pick(model(*inputs))
        got = pick(compiled(*inputs))
    assert_same_model_close(got, want, model)
    return want


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 384), torch.nn.GELU(), torch.nn.Linear(384, 128),
                               torch.nn.LayerNorm(128), torch.nn.Linear(128, 10)).eval()


def gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=2, vocab_size=512, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                                   max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("scheme, kw, fmt, cos_min, err_max", SCHEMES, ids=IDS)
def test_mlp(scheme, kw, fmt, cos_min, err_max):
    base = mlp()
    m = quantized(base, scheme, **kw)
    assert [type(x).__name__ for x in m] == ["QLinear", "GELU", "QLinear", "LayerNorm", "QLinear"]
    assert all(x.format == fmt for x in m if isinstance(x, QLinear))
    x = torch.randn(6, 256)
    got = compiled_vs_eager(m, x)
    with torch.no_grad():
        loose_close(got, base(x), cos_min, err_max)


@pytest.mark.parametrize("make", [gpt2, llama])
@pytest.mark.parametrize("scheme, kw, fmt, cos_min, err_max", SCHEMES, ids=IDS)
def test_transformers_model(make, scheme, kw, fmt, cos_min, err_max):
    base = make()
    m = quantized(base, scheme, include_embeddings=True, **kw)
    layers = summary(m).layers
    assert layers and {q.format for q in layers} == {fmt}
    assert any(q.kind == "embedding" for q in layers)
    ids = torch.randint(0, 512, (2, 11))
    got = compiled_vs_eager(m, ids, pick=lambda o: o.logits)
    with torch.no_grad():
        loose_close(got, base(ids).logits, cos_min, err_max)


def test_gpt2_conv1d_and_tied_head():
    base = gpt2()
    m = quantized(base, "int8")
    attn = m.transformer.h[0].attn
    assert isinstance(attn.c_attn, QLinear) and (attn.c_attn.in_features, attn.c_attn.out_features) == (128, 384)
    # Conv1D keeps its weight as [in, out]: the QLinear holds it transposed
    w = base.transformer.h[0].attn.c_attn.weight.t()
    assert torch.allclose(zenith.quant.dequantize(attn.c_attn.weight, "int8"), w, atol=w.abs().max().item() / 200)
    # embeddings not asked for: wte and the LM head that shares its weight stay fp32
    assert isinstance(m.transformer.wte, torch.nn.Embedding) and isinstance(m.lm_head, torch.nn.Linear)
    assert "include_embeddings=True" in summary(m).kept["lm_head"]
    m = quantized(base, "int8", include_embeddings=True)
    assert isinstance(m.transformer.wte, QEmbedding) and isinstance(m.lm_head, QLinear)
    assert m.lm_head.weight is m.transformer.wte.weight  # one copy of the bytes
    assert sum(1 for _ in m.buffers() if _.dtype == torch.uint8) == len({id(b) for b in m.buffers()
                                                                          if b.dtype == torch.uint8})


def test_gemma3_scaled_embedding():
    cfg = transformers.Gemma3TextConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1, head_dim=64, vocab_size=512,
                                        max_position_embeddings=64, sliding_window=16)
    torch.manual_seed(0)
    base = transformers.Gemma3ForCausalLM(cfg).eval()
    m = quantized(base, "int8", include_embeddings=True)
    emb = m.model.embed_tokens
    assert isinstance(emb, QEmbedding) and float(emb.embed_scale) == pytest.approx(128**0.5)
    ids = torch.randint(0, 512, (1, 9))
    got = compiled_vs_eager(m, ids, pick=lambda o: o.logits)
    with torch.no_grad():
        loose_close(got, base(ids).logits, 0.999, 0.05)  # int8 weights and activations through 2 layers


def test_layers_that_do_not_fit_stay_and_are_reported():
    m = torch.nn.Sequential(torch.nn.Linear(96, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    with pytest.warns(UserWarning, match=r"1 layer\(s\) stay in floating point: 0 \(.*K=96 is not a multiple"):
        zenith.quantize(m, "int4", group_size=64)
    assert isinstance(m[0], torch.nn.Linear) and isinstance(m[2], QLinear)
    assert "K=96" in summary(m).kept["0"]
    r = zenith.explain(m, torch.randn(2, 96))
    assert [q.name for q in r.quantized] == ["2"] and "0" in r.quant_kept
    assert "quantized layers  1" in str(r) and "kept in floating point: 0" in str(r)


def test_exclude_and_shared_modules():
    shared = torch.nn.Linear(32, 32)
    m = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(32, 32), shared), shared,
                            torch.nn.Linear(32, 32))
    zenith.quantize(m, "int8", exclude=["2"])
    assert isinstance(m[2], torch.nn.Linear)
    assert isinstance(m[1], QLinear) and m[0][1] is m[1]  # one replacement for one module
    m2 = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(32, 32)), torch.nn.Linear(32, 32))
    zenith.quantize(m2, "int8", exclude="0")  # a pattern excludes everything inside it
    assert isinstance(m2[0][0], torch.nn.Linear) and isinstance(m2[1], QLinear)
    m3 = gpt2()
    zenith.quantize(m3, "int8", exclude=["*.mlp.*"])
    assert isinstance(m3.transformer.h[0].mlp.c_fc, transformers.pytorch_utils.Conv1D)
    assert isinstance(m3.transformer.h[0].attn.c_attn, QLinear)


def test_a_bare_layer_is_returned_converted():
    lin = torch.nn.Linear(64, 3)
    q = zenith.quantize(lin, "nf4")
    assert isinstance(q, QLinear) and q.format == "nf4"


def test_errors():
    m = mlp()
    with pytest.raises(ValueError, match="unknown scheme 'int3'; schemes: 'int8', 'int4', 'nf4', 'int8-dynamic'"):
        zenith.quantize(m, "int3")
    with pytest.raises(ValueError, match="group_size must be one of 32, 64, 128, got 48"):
        zenith.quantize(m, "int4", group_size=48)
    with pytest.raises(ValueError, match="int8 has one weight scale per output channel"):
        zenith.quantize(m, "int8", group_size=32)
    with pytest.raises(ValueError, match="int8 is symmetric only"):
        zenith.quantize(m, "int8", symmetric=False)
    with pytest.raises(ValueError, match="nf4 uses blocks of 64"):
        zenith.quantize(m, "nf4", group_size=32)
    with pytest.raises(TypeError, match="expected an nn.Module"):
        zenith.quantize(lambda x: x, "int8")
    assert all(isinstance(x, (torch.nn.Linear, torch.nn.GELU, torch.nn.LayerNorm)) for x in m)  # untouched
    with torch.device("meta"):  # no values: its forward would return meta tensors without a word
        on_meta = mlp()
    with pytest.raises(ValueError, match=r"weights of 0, 2, 4 are on the meta device .*zenith.load_quantized"):
        zenith.quantize(on_meta, "int8")
    with pytest.warns(UserWarning, match="has no layer this scheme quantizes"):
        zenith.quantize(torch.nn.Sequential(torch.nn.ReLU()), "int4")
    with pytest.warns(UserWarning, match="has no layer this scheme quantizes"):  # embeddings only, not asked for
        zenith.quantize(torch.nn.Sequential(torch.nn.Embedding(10, 32)), "int4")


@pytest.mark.parametrize("scheme", ["int8", "int8-dynamic", "nf4"])
def test_quantized_layers_keep_the_model_mode_and_freeze(scheme):
    # the new layers take their module's mode: an eval model stays in eval (zenith.freeze
    # refuses a module in training mode) and matches eager frozen; a training one stays training
    m = quantized(mlp(), scheme)
    assert not any(x.training for x in m.modules()), [n for n, x in m.named_modules() if x.training]
    x = torch.randn(3, 256)
    with torch.no_grad():
        want = m(x)
        got = zenith.freeze(m)(x)
    assert_same_model_close(got, want, m)
    lin = quantized(torch.nn.Linear(64, 3).eval(), scheme)  # a bare layer, returned converted
    assert not lin.training
    t = quantized(mlp().train(), scheme)
    assert all(x.training for x in t.modules())


def test_quantized_model_trains_around_frozen_weights():
    # the quantized weights are frozen; gradients reach the input, the biases and the rest,
    # compiled as in eager
    m = quantized(mlp(), "int4")
    grads = []
    for run in (torch.compile(m, backend="zenith"), m):
        m.zero_grad()
        x = torch.ones(4, 256).requires_grad_(True)
        run(x).sum().backward()
        grads.append((x.grad, m[0].bias.grad, m[3].weight.grad))
    for got, want in zip(*grads):
        assert want is not None
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-5)


def test_large_weights_move_to_2mib_aligned_memory_that_saves_and_copies():
    """Quantized weights of 2 MiB or more are copied into their own 2 MiB-aligned mapping
    (asked for 2 MiB pages; whether Linux grants them is the machine's) with the same
    bytes; smaller ones stay where quantize_weight made them. The moved weight behaves as
    any tensor: state_dict round trip through torch.save, deepcopy, the same outputs."""
    import io

    from zenith import _C
    from zenith.quant.formats import quantize_weight

    torch.manual_seed(0)
    big, small = torch.nn.Linear(2048, 4096), torch.nn.Linear(256, 64)  # q4_0: 4.5 MiB and 9 KiB
    model = torch.nn.Sequential(small, torch.nn.Linear(64, 2048), big)
    ref = [quantize_weight(m.weight.detach(), "q4_0") for m in (small, big)]
    q = zenith.quantize(copy.deepcopy(model), "int4")
    qs, qb = q[0], q[2]
    assert qb.weight.data_ptr() % (2 << 20) == 0 and torch.equal(qb.weight, ref[1])
    assert torch.equal(qs.weight, ref[0])
    x = torch.randn(3, 256)
    with torch.no_grad():
        y = q(x)
        buf = io.BytesIO()
        torch.save(q.state_dict(), buf)
        buf.seek(0)
        again = zenith.quantize(copy.deepcopy(model), "int4")
        again.load_state_dict(torch.load(buf, weights_only=True))
        assert torch.equal(again(x), y) and torch.equal(copy.deepcopy(q)(x), y)
    assert _C.weight_buffer(0).numel() == 0
    with pytest.raises(ValueError, match="negative"):
        _C.weight_buffer(-1)
