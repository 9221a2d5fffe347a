"""zenith.save_quantized / load_quantized: quantized models written to one safetensors
file and rebuilt into a fresh model of the same architecture (on the meta device or the
CPU), every output equal to the quantized model's, bit for bit; bad files and
mismatched models rejected with errors that name what differs."""
import json

import pytest
import torch
from torch import nn

import zenith
from zenith.quant import QConv2d, QEmbedding, QLinear

transformers = pytest.importorskip("transformers")
safetensors = pytest.importorskip("safetensors")


def _llama(tied=True, hidden=64):
    cfg = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                   tie_word_embeddings=tied)
    return cfg


def _kinds(model):
    return {n: type(m).__name__ for n, m in model.named_modules() if isinstance(m, (QLinear, QConv2d, QEmbedding))}


@pytest.mark.parametrize("scheme, kw", [("int4", {"include_embeddings": True}), ("int8-dynamic", {}),
                                        ("nf4", {"group_size": 64})])
def test_llama_round_trip_onto_a_meta_model(tmp_path, scheme, kw):
    torch.manual_seed(0)
    cfg = _llama()
    m = transformers.LlamaForCausalLM(cfg).eval()
    zenith.quantize(m, scheme, **kw)
    path = tmp_path / "m.safetensors"
    zenith.save_quantized(m, path)
    with torch.device("meta"):
        fresh = transformers.LlamaForCausalLM(cfg).eval()
    loaded = zenith.load_quantized(fresh, path)
    assert loaded is fresh and _kinds(fresh) == _kinds(m)
    # the tied head reads the embedding's bytes (quantized, or the fp32 Parameter), stored once
    assert fresh.lm_head.weight is fresh.model.embed_tokens.weight
    assert isinstance(fresh.lm_head, QLinear) == bool(kw.get("include_embeddings"))
    ids = torch.randint(0, 256, (2, 9))
    with torch.no_grad():
        want = m(ids).logits
        assert torch.equal(fresh(ids).logits, want)
        assert torch.equal(torch.compile(fresh, backend="zenith")(ids).logits,
                           torch.compile(m, backend="zenith")(ids).logits)


def test_static_int8_cnn_with_smoothing_onto_a_cpu_model(tmp_path):
    # QConv2d (static scales), a smoothed static QLinear (x_smooth), batch-norm buffers
    def build():
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2),
                             nn.ReLU(), nn.Flatten(), nn.Linear(8 * 7 * 7, 10)).eval()

    torch.manual_seed(0)
    m = build()
    m[1].running_mean.uniform_(-0.5, 0.5)
    cal = [torch.randn(2, 3, 16, 16) for _ in range(3)]
    zenith.quantize(m, "int8-static", calibration=cal, smooth=0.5, int8_everywhere=True)
    assert any(isinstance(x, QConv2d) for x in m) and isinstance(m[6], QLinear) and m[6].x_smooth is not None
    path = tmp_path / "cnn.safetensors"
    zenith.save_quantized(m, path)
    torch.manual_seed(1)
    fresh = zenith.load_quantized(build(), path)  # random init: every value must come from the file
    x = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(fresh(x), m(x))
    assert fresh[6].x_scale == m[6].x_scale and torch.equal(fresh[6].x_smooth, m[6].x_smooth)


def test_gpt2_conv1d_layers(tmp_path):
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=200, n_positions=64)
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(cfg).eval()
    zenith.quantize(m, "int8")
    path = tmp_path / "gpt2.safetensors"
    zenith.save_quantized(m, path)
    fresh = zenith.load_quantized(transformers.GPT2LMHeadModel(cfg).eval(), path)
    ids = torch.randint(0, 200, (1, 12))
    with torch.no_grad():
        assert torch.equal(fresh(ids).logits, m(ids).logits)


def test_bad_files_and_mismatched_models(tmp_path):
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(_llama()).eval()
    zenith.quantize(m, "int4")
    path = tmp_path / "m.safetensors"
    zenith.save_quantized(m, path)
    fresh = lambda cfg=_llama(): transformers.LlamaForCausalLM(cfg).eval()  # noqa: E731
    with pytest.raises(FileNotFoundError, match="no such file"):
        zenith.load_quantized(fresh(), tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(ValueError, match=r"load_quantized\(.*junk.safetensors'\): not a readable safetensors file"):
        zenith.load_quantized(fresh(), junk)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:-1000])
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        zenith.load_quantized(fresh(), cut)
    plain = tmp_path / "plain.safetensors"
    from safetensors.torch import save_file
    save_file({"a": torch.zeros(2)}, str(plain))
    with pytest.raises(ValueError, match="not written by zenith.save_quantized"):
        zenith.load_quantized(fresh(), plain)
    with pytest.raises(ValueError, match=r"'model.layers.0.self_attn.q_proj' holds 64 x 64 values in the file; the "
                                         r"model's Linear is 96 x 96"):
        zenith.load_quantized(fresh(_llama(hidden=96)), path)
    small = _llama()
    small.num_hidden_layers = 1
    with pytest.raises(ValueError, match="the model has no module 'model.layers.1"):
        zenith.load_quantized(fresh(small), path)
    # a file that lacks a parameter the model has: named, never left at its random init
    with safetensors.safe_open(str(path), "pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys() if k != "model.norm.weight"}
    partial = tmp_path / "partial.safetensors"
    save_file(tensors, str(partial), metadata=meta)
    with pytest.raises(ValueError, match="the file holds no tensor for model.norm.weight"):
        zenith.load_quantized(fresh(), partial)
    newer = tmp_path / "newer.safetensors"
    info = json.loads(meta["zenith.quantized"])
    info["version"] = 99
    save_file(tensors, str(newer), metadata={"zenith.quantized": json.dumps(info)})
    with pytest.raises(ValueError, match="format version 99"):
        zenith.load_quantized(fresh(), newer)
    with pytest.raises(ValueError, match="has no quantized layer"):
        zenith.save_quantized(fresh(), tmp_path / "x.safetensors")


def test_the_file_is_safetensors_and_loads_without_torch_load(tmp_path, monkeypatch):
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(_llama()).eval()
    zenith.quantize(m, "int8")
    path = tmp_path / "m.safetensors"
    zenith.save_quantized(m, path)
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load (pickle) was called"))
    with safetensors.safe_open(str(path), "pt") as f:  # every tensor plain data, the record JSON
        assert json.loads(f.metadata()["zenith.quantized"])["version"] == 1
        assert f.get_tensor("model.layers.0.mlp.up_proj.weight").dtype == torch.uint8
    zenith.load_quantized(transformers.LlamaForCausalLM(_llama()).eval(), path)


def test_shared_modules_a_bare_layer_and_a_scaled_embedding(tmp_path):
    # one module under two names stays one module; a bare layer round-trips; Gemma 3 with
    # its (scaled) embedding left in float onto a meta model: the embedding's scale, a
    # buffer outside the state dict, comes from the file
    torch.manual_seed(0)
    s = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
    s.add_module("again", s[0])
    zenith.quantize(s, "int8")
    zenith.save_quantized(s, tmp_path / "s.safetensors")
    fresh = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
    fresh.add_module("again", fresh[0])
    fresh = zenith.load_quantized(fresh, tmp_path / "s.safetensors")
    assert fresh.again is fresh[0] and isinstance(fresh[0], QLinear)
    lin = zenith.quantize(nn.Linear(64, 32), "int4")
    zenith.save_quantized(lin, tmp_path / "lin.safetensors")
    back = zenith.load_quantized(nn.Linear(64, 32), tmp_path / "lin.safetensors")
    x = torch.randn(3, 64)
    assert isinstance(back, QLinear) and torch.equal(back(x), lin(x))

    cfg = transformers.Gemma3TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=256,
                                        sliding_window=8)
    g = transformers.Gemma3ForCausalLM(cfg).eval()
    zenith.quantize(g, "int4")
    zenith.save_quantized(g, tmp_path / "g.safetensors")
    with torch.device("meta"):
        skeleton = transformers.Gemma3ForCausalLM(cfg).eval()
    loaded = zenith.load_quantized(skeleton, tmp_path / "g.safetensors")
    ids = torch.randint(0, 256, (1, 11))
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, g(ids).logits)


def test_models_built_otherwise_are_refused(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=64, n_layer=1, n_head=4, vocab_size=200, n_positions=64)
    m = transformers.GPT2LMHeadModel(cfg).eval()
    zenith.quantize(m, "int8")
    zenith.save_quantized(m, tmp_path / "gpt2.safetensors")
    other = transformers.GPT2Config(n_embd=64, n_layer=1, n_head=4, vocab_size=200, n_positions=64, n_inner=96)
    with pytest.raises(ValueError, match=r"'transformer.h.0.mlp.c_fc' holds 256 x 64 values in the file; the "
                                         r"model's Conv1D is 96 x 64"):
        zenith.load_quantized(transformers.GPT2LMHeadModel(other), tmp_path / "gpt2.safetensors")

    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Flatten(), nn.Linear(8 * 36, 4))
    zenith.quantize(net, "int8-dynamic", int8_everywhere=True)
    zenith.save_quantized(net, tmp_path / "net.safetensors")
    with pytest.raises(ValueError, match=r"'0' is a conv with kernel, stride, padding, dilation"):
        zenith.load_quantized(nn.Sequential(nn.Conv2d(3, 8, 3, padding=0), nn.Flatten(), nn.Linear(8 * 36, 4)),
                              tmp_path / "net.safetensors")
    with pytest.raises(ValueError, match=r"'2' has a bias in the file; the model's Linear has none"):
        zenith.load_quantized(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Flatten(),
                                            nn.Linear(8 * 36, 4, bias=False)), tmp_path / "net.safetensors")
    fresh = zenith.load_quantized(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Flatten(), nn.Linear(8 * 36, 4)),
                                  tmp_path / "net.safetensors")
    assert fresh[2].bias.requires_grad  # as the model's own layer had it
