"""Whole models through torch.compile(backend="zenith") against eager, fp32, eval.
Each asserts that no ATen node fell back to PyTorch (zenith.stats()) and that the
outputs match eager within rtol 1e-4 / atol 1e-5."""
import pytest
import torch

import zenith

transformers = pytest.importorskip("transformers")
torchvision = pytest.importorskip("torchvision")

TOL = dict(rtol=1e-4, atol=1e-5)


def compile_and_compare(model, *inputs, tol=TOL, pick=lambda o: o):
    model.eval()
    before = zenith.stats()
    compiled = torch.compile(model, backend="zenith")
    with torch.no_grad():
        want = pick(model(*inputs))
        got = pick(compiled(*inputs))
    after = zenith.stats()
    assert after["graphs_compiled"] > before["graphs_compiled"], "Zenith compiled nothing"
    assert after["nodes_fallback"] == before["nodes_fallback"], "some ATen nodes fell back to PyTorch"
    assert after["segments_run"] > before["segments_run"], "the Zenith runtime never ran"
    torch.testing.assert_close(got, want, **tol)
    return compiled


def test_mlp():
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
                            torch.nn.LayerNorm(64), torch.nn.Linear(64, 10))
    compile_and_compare(m, torch.randn(16, 32))


def test_small_cnn():
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.SiLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(32, 10))
    with torch.no_grad():
        for mod in m.modules():  # non-trivial running statistics
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-1, 1)
                mod.running_var.uniform_(0.5, 2)
    compile_and_compare(m, torch.randn(2, 3, 32, 32))


def test_bert_base():
    cfg = transformers.BertConfig()  # bert-base: 12 layers, hidden 768
    m = transformers.BertModel(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 24))
    mask = torch.ones_like(ids)
    mask[1, 17:] = 0  # padding in the second sequence
    compile_and_compare(m, ids, mask, pick=lambda o: o.last_hidden_state)


def test_gpt2_small():
    cfg = transformers.GPT2Config()  # GPT-2 small: 12 layers, 768 wide
    m = transformers.GPT2LMHeadModel(cfg)
    ids = torch.randint(0, cfg.vocab_size, (1, 20))
    compile_and_compare(m, ids, pick=lambda o: o.logits, tol=dict(rtol=1e-4, atol=2e-5))


def _llama():
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=3, num_attention_heads=8,
                                   num_key_value_heads=2, vocab_size=1024, max_position_embeddings=256)
    return transformers.LlamaForCausalLM(cfg).eval()


def test_llama_small_gqa():
    m = _llama()
    ids = torch.randint(0, 1024, (1, 19))
    compile_and_compare(m, ids, pick=lambda o: o.logits)


def test_llama_generate_greedy_matches_eager():
    m = _llama()
    ids = torch.randint(0, 1024, (1, 7))
    with torch.no_grad():
        want = m.generate(ids, max_new_tokens=12, do_sample=False, min_new_tokens=12)
        before = zenith.stats()
        m.forward = torch.compile(m.forward, backend="zenith")
        got = m.generate(ids, max_new_tokens=12, do_sample=False, min_new_tokens=12)
        after = zenith.stats()
    assert after["nodes_fallback"] == before["nodes_fallback"]
    assert after["segments_run"] - before["segments_run"] >= 12  # prefill and each decode step ran on Zenith
    assert torch.equal(got, want), (got, want)


def test_gpt2_generate_greedy_matches_eager():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000)
    m = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 1000, (1, 5))
    with torch.no_grad():
        want = m.generate(ids, max_new_tokens=10, do_sample=False, min_new_tokens=10, pad_token_id=0)
        before = zenith.stats()
        m.forward = torch.compile(m.forward, backend="zenith")
        got = m.generate(ids, max_new_tokens=10, do_sample=False, min_new_tokens=10, pad_token_id=0)
        after = zenith.stats()
    assert after["nodes_fallback"] == before["nodes_fallback"]
    assert torch.equal(got, want)


def test_resnet50():
    m = calibrate_batch_norm(torchvision.models.resnet50(), (2, 3, 224, 224))
    compile_and_compare(m, torch.randn(1, 3, 224, 224), tol=dict(rtol=1e-4, atol=1e-4))


def test_resnet18_blocked_layout(monkeypatch, tmp_path):
    """The blocked channel layout, on by default for a static batch (1 here): the convs
    run as conv2d_nchwc (Winograd over the blocked layout for the 3x3 / 1 ones), the stem
    writing the blocked layout and the max pooling after it blocked too (nothing converts
    in), and the result matches eager."""
    monkeypatch.delenv("ZENITH_NCHWC", raising=False)
    torch._dynamo.reset()
    m = calibrate_batch_norm(torchvision.models.resnet18(), (2, 3, 112, 112))
    x = torch.randn(1, 3, 112, 112)
    with zenith.profile(trace=str(tmp_path / "trace.json")) as p:  # a trace keeps each call's op
        compile_and_compare(m, x, tol=dict(rtol=1e-4, atol=1e-4))
    ops = {e[0] for e in p.events}
    assert {"conv2d_nchwc", "max_pool2d_nchwc", "from_nchwc"} <= ops, ops
    assert not ops & {"to_nchwc", "max_pool2d", "conv2d"}, ops
    torch._dynamo.reset()


def calibrate_batch_norm(m, shape):
    """Running statistics from a few batches, as training would leave them; with the
    untrained defaults (mean 0, var 1) activations shrink to ~1e-7 through the network
    and any tolerance would accept any output."""
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(*shape))
    return m.eval()


def test_mobilenet_v3_small():
    m = torchvision.models.mobilenet_v3_small()
    for lin in (m.classifier[0], m.classifier[3]):  # torchvision's init leaves logits ~1e-9
        torch.nn.init.normal_(lin.weight, std=lin.in_features ** -0.5)
    m = calibrate_batch_norm(m, (4, 3, 224, 224))
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert m(x).abs().max() > 1e-3, "logits too small to compare meaningfully"
    compile_and_compare(m, x)


def test_mobilenet_v2():
    # ReLU6 (clamp 0..6) fused into the convolutions, depthwise 3x3 at strides 1 and 2.
    m = torchvision.models.mobilenet_v2()
    torch.nn.init.normal_(m.classifier[1].weight, std=m.classifier[1].in_features ** -0.5)
    m = calibrate_batch_norm(m, (4, 3, 224, 224))
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert m(x).abs().max() > 1e-3, "logits too small to compare meaningfully"
    compile_and_compare(m, x)


def test_vit_b_16():
    m = torchvision.models.vit_b_16()
    torch.nn.init.normal_(m.heads.head.weight, std=0.02)  # torchvision zero-initialises the head
    compile_and_compare(m, torch.randn(1, 3, 224, 224), tol=dict(rtol=1e-4, atol=2e-5))


def test_swin_t():
    # Shifted windows: the attention mask built by slice writes (fill + slice_scatter),
    # window indices by integer fmod, the pooled features through as_strided; one segment.
    m = torchvision.models.swin_t()
    torch.nn.init.normal_(m.head.weight, std=m.head.in_features ** -0.5)
    compile_and_compare(m, torch.randn(1, 3, 224, 224), tol=dict(rtol=1e-4, atol=2e-5))


def test_lraspp_segmentation():
    # MobileNet V3 features, an attention branch, and bilinear upsampling to the image (upsample2d)
    m = calibrate_batch_norm(torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None), (2, 3, 128, 128))
    compile_and_compare(m, torch.randn(1, 3, 128, 128), pick=lambda o: o["out"], tol=dict(rtol=1e-4, atol=2e-5))


def test_wav2vec2_and_whisper_encoder():
    # conv1d front ends (a conv2d over one row), wav2vec2's GroupNorm (prims.var) and its
    # weight-normed grouped positional conv; Whisper's two GELU conv1ds. Small configs.
    cfg = transformers.Wav2Vec2Config(hidden_size=96, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=192, conv_dim=(64, 64, 64), conv_stride=(5, 2, 2),
                                      conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                                      num_conv_pos_embedding_groups=4)
    compile_and_compare(transformers.Wav2Vec2Model(cfg), torch.randn(1, 4000),
                        pick=lambda o: o.last_hidden_state, tol=dict(rtol=1e-4, atol=2e-5))
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    wcfg = transformers.WhisperConfig(d_model=96, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=192,
                                      num_mel_bins=20, max_source_positions=40)
    compile_and_compare(WhisperEncoder(wcfg), torch.randn(1, 20, 80), pick=lambda o: o.last_hidden_state,
                        tol=dict(rtol=1e-4, atol=2e-5))


@pytest.mark.parametrize("scheme", ["fp32", "int8-static", "int8-dynamic"])
def test_resnet18_batch_slices(monkeypatch, tmp_path, scheme):
    """Batch slices (the runtime running the first stages a few images a pass where a
    batch's tensors outgrow the cache), forced on a small model by a small cache size:
    the stem runs on fewer images than the batch, and the output equals eager's (fp32)
    or the same quantized model's run unsliced, bit for bit (int8: each image's codes
    and scales are its own either way)."""
    m = calibrate_batch_norm(torchvision.models.resnet18(), (2, 3, 64, 64))
    x = torch.randn(6, 3, 64, 64)
    if scheme == "int8-static":
        zenith.quantize(m, scheme, calibration=[torch.randn(2, 3, 64, 64) for _ in range(2)])
    elif scheme == "int8-dynamic":
        zenith.quantize(m, scheme)
    with torch.no_grad():
        monkeypatch.setenv("ZENITH_BATCH_SLICE_CACHE", "0")
        whole = zenith.freeze(m)(x)
        # 512 KiB: the stem's output (6 x 64 x 32 x 32 floats, 1.5 MiB) is over a quarter of it.
        monkeypatch.setenv("ZENITH_BATCH_SLICE_CACHE", str(512 << 10))
        frozen = zenith.freeze(m)
        with zenith.profile(trace=str(tmp_path / "trace.json")) as p:
            got = frozen(x)
    stem = [e for e in p.events if e[1] == 0]  # node 0, the stem conv: once a pass
    assert len(stem) > 1 and all(e[6][0] * len(stem) == 6 for e in stem), stem
    if scheme == "fp32":
        torch.testing.assert_close(got, m(x), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got, whole, rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(got, whole)
    torch._dynamo.reset()
