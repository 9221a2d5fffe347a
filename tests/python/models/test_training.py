"""Training steps through torch.compile(backend="zenith") against eager: the forward and
backward graphs run on Zenith's kernels (what falls back is named per model, with its
reason), and the loss, every gradient and batch norm's running statistics match eager's."""
import copy

import pytest
import torch

from zenith import backend

transformers = pytest.importorskip("transformers")
torchvision = pytest.importorskip("torchvision")

TOL = dict(rtol=1e-4, atol=1e-5)


def train_step(model, inputs, loss_of, allowed):
    """One step eager, one compiled and one eager in float64 from the same weights; checks
    the fallbacks against `allowed`, the loss and running statistics against eager's, and
    each gradient against float64's: no further from it than 4x eager's own error (or
    1e-5 of the largest gradient). A deep stack of batch norms at batch 2 makes eager's
    float32 gradients 1e-4 off, so a fixed tolerance against eager would either pass
    anything or fail on rounding."""
    model.train()
    ref, mod, f64 = model, copy.deepcopy(model), copy.deepcopy(model).double()
    want = loss_of(ref(*inputs))
    want.backward()
    loss_of(f64(*[x.double() if x.is_floating_point() else x for x in inputs])).backward()
    with backend.collect_reports() as sink:
        got = loss_of(torch.compile(mod, backend="zenith")(*inputs))
        got.backward()
    assert len(sink) == 2, "expected a forward and a backward graph"
    fallbacks = {k for g in sink for k in g.fallback_ops}
    assert fallbacks <= set(allowed), f"unexpected fallbacks: {fallbacks - set(allowed)}"
    assert sum(g.nodes_native for g in sink) > 0.9 * sum(g.nodes_total for g in sink)
    torch.testing.assert_close(got, want, **TOL)
    scale = max(p.grad.abs().max().item() for p in f64.parameters() if p.grad is not None)
    for (name, p), q, r in zip(ref.named_parameters(), mod.parameters(), f64.parameters()):
        if p.grad is None:
            assert q.grad is None, name
            continue
        err_eager = (p.grad.double() - r.grad).abs().max().item() / scale
        err = (q.grad.double() - r.grad).abs().max().item() / scale
        assert err <= max(4 * err_eager, 1e-5), f"{name}: {err:.3g} from float64, eager {err_eager:.3g}"
    for (name, b), c in zip(ref.named_buffers(), mod.buffers()):  # running statistics
        if b.is_floating_point():
            torch.testing.assert_close(c, b, **TOL, msg=lambda m: f"{name}: {m}")
        else:
            assert torch.equal(c, b), name
    return fallbacks


NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
                  attn_pdrop=0.0)  # eager draws dropout's masks by another route than rand_like


# attention's training form (its saved log-sum-exp, its backward) stays in PyTorch
SDPA = {"aten._scaled_dot_product_flash_attention_for_cpu.default",
        "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"}


@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama"])
def test_transformer_training_step(arch):
    torch.manual_seed(0)
    ids = torch.randint(0, 500, (2, 24))
    if arch == "bert":  # GELU, LayerNorm, the embeddings' gradients (index_put), token types
        model = transformers.BertForSequenceClassification(transformers.BertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=500,
            **NO_DROPOUT))
        allowed = SDPA
    elif arch == "gpt2":  # tied embeddings: both uses of the table add into one gradient
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=32, bos_token_id=0, eos_token_id=0,
            **NO_DROPOUT))
        allowed = SDPA
    else:  # RMSNorm, RoPE, SwiGLU, grouped-query attention
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=500))
        allowed = SDPA
    train_step(model, (ids,), lambda o: o.logits.float().pow(2).mean(), allowed)


def test_dropout_in_training_follows_the_seed():
    """Dropout's random numbers come from PyTorch's generator (a visible fallback with that
    reason): a compiled training step repeats under one seed and changes with another."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Dropout(0.5), torch.nn.Linear(64, 4)).train()
    x = torch.randn(8, 16)
    with backend.collect_reports() as sink:
        c = torch.compile(model, backend="zenith")
        losses = []
        for seed in (1, 1, 2):
            torch.manual_seed(seed)
            losses.append(c(x).pow(2).mean().item())
    reasons = {k: e["reason"] for g in sink for k, e in g.fallback_ops.items()}
    assert "random numbers come from PyTorch's generator" in reasons.get("aten.rand_like.default", "")
    assert set(reasons) == {"aten.rand_like.default"}
    assert losses[0] == losses[1] != losses[2]


@pytest.mark.parametrize("arch", ["resnet18", "mobilenet_v2"])
def test_cnn_training_step(arch):
    # batch norm in training mode (batch statistics, running statistics updated), ReLU /
    # ReLU6 backward masks, the convolutions' backward (input and filter gradients), max
    # pooling's indices and its backward: nothing falls back
    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)(num_classes=10)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    allowed = set()
    train_step(model, (torch.randn(2, 3, 40, 40),), lambda o: o.pow(2).mean(), allowed)


def test_conv_filters_updated_in_place_are_read_each_step():
    """A training forward packs its convs' filters once per call (they are not constant):
    an optimizer's in-place update at the same address must reach the next step. Three
    SGD steps of a conv net (a Winograd-sized 3x3 conv, a 1x1, a strided one) against
    eager's losses and weights."""
    torch.manual_seed(0)
    nn = torch.nn
    # batch norms between the convs, as in ResNet: NCHW conv2d (the blocked layout takes
    # conv-to-conv chains, whose filters it packs itself)
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                          nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.Conv2d(64, 32, 1),
                          nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 16, 3, stride=2), nn.Flatten(), nn.LazyLinear(4))
    x = torch.randn(2, 3, 56, 56)  # ResNet's first stage: Winograd's and the packed GEMMs' sizes
    model(x)  # materializes the lazy layer
    ref, mod = model, copy.deepcopy(model)
    c = torch.compile(mod, backend="zenith")
    opts = [torch.optim.SGD(m.parameters(), lr=1e-3) for m in (ref, mod)]  # larger steps make it chaotic, eager too
    first = None
    for _ in range(3):
        losses = []
        for m, opt in zip((ref, c), opts):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[1] - losses[0]) <= 1e-4 * abs(losses[0]), losses
        first = losses[0] if first is None else first
    # the steps move the loss far past the tolerance, so stale filters would show
    assert abs(losses[0] - first) > 0.05 * abs(first), (first, losses)
    for p, q in zip(ref.parameters(), mod.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
