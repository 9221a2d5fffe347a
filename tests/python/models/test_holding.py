"""Every way a user creates or holds a model, compiled with Zenith and checked against
eager: built or loaded under torch.inference_mode (parameters are inference tensors),
built under no_grad, deep-copied, requires_grad_(False), parameters replaced by
load_state_dict(assign=True), weights shared between modules (tied embeddings), and
moved between dtypes."""
import copy
import io

import pytest
import torch

import zenith

transformers = pytest.importorskip("transformers")

TOL = dict(rtol=1e-4, atol=1e-5)
CONV_TOL = dict(rtol=1e-4, atol=1e-4)


def _cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 64, 3, stride=2),
        torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3, padding=1),  # Winograd: filters transformed in advance
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).eval()


def _gpt2(seed=0):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=256, n_positions=128, bos_token_id=0,
                                  eos_token_id=0, pad_token_id=0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _generate(m, ids, n=12):
    return m.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)


def test_conv_model_built_and_run_under_inference_mode():
    """The issue's crash: parameters made under inference_mode are inference tensors,
    which have no version counter. Zenith keeps no packed copy of them (a change made
    in place inside inference_mode could not be seen) and answers right, inside
    inference_mode and outside it."""
    x = torch.randn(2, 3, 20, 20)
    with torch.inference_mode():
        m = _cnn()
        assert all(p.is_inference() for p in m.parameters())
        with zenith.backend.collect_reports() as reports:
            c = zenith.compile(m)
            torch.testing.assert_close(c(x), m(x), **CONV_TOL)
        assert reports and sum(r.packed_weight_bytes for r in reports) == 0
        for p in m.parameters():  # an in-place change inside inference_mode is seen
            p.mul_(0.5)
        torch.testing.assert_close(c(x), m(x), **CONV_TOL)
    with torch.no_grad():  # the same inference-tensor weights, called outside inference_mode
        torch.testing.assert_close(c(x), m(x), **CONV_TOL)


def test_deepcopy_of_gpt2_generates_under_inference_mode():
    """The issue's second crash: copy.deepcopy of GPT-2 and generate(), both inside
    inference_mode (GPT-2's Conv1D weights are row-major: the path that packs)."""
    m = _gpt2()
    ids = torch.randint(1, 256, (1, 6))
    with torch.no_grad():
        want = _generate(m, ids)
    with torch.inference_mode():
        m2 = copy.deepcopy(m)
        m2.forward = torch.compile(m2.forward, backend="zenith")
        got = _generate(m2, ids)
    assert torch.equal(got, want), (got, want)


def test_model_loaded_under_inference_mode():
    """A checkpoint loaded into a model constructed under inference_mode (as a serving
    script wraps its whole start-up): compiled outside, called under no_grad."""
    src = _gpt2(seed=1)
    buf = io.BytesIO()
    torch.save(src.state_dict(), buf)
    with torch.inference_mode():
        m = _gpt2()
        buf.seek(0)
        m.load_state_dict(torch.load(buf))
    assert m.transformer.h[0].attn.c_attn.weight.is_inference()
    c = zenith.compile(m)
    ids = torch.randint(0, 256, (2, 24))
    with torch.no_grad():
        torch.testing.assert_close(c(ids).logits, src(ids).logits, **TOL)


def test_model_built_under_no_grad_and_called_with_grad_enabled():
    with torch.no_grad():
        m = _cnn()
    assert all(p.requires_grad for p in m.parameters())  # parameters still require grad
    x = torch.randn(2, 3, 20, 20)
    c = zenith.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x), **CONV_TOL)
    got = c(x)  # grad enabled: a training graph (forward and backward)
    torch.testing.assert_close(got, m(x), **CONV_TOL)
    got.sum().backward()
    assert m[0].weight.grad is not None


def test_deep_copies_compiled_separately_stay_independent():
    """A compiled model and a deep copy of it compiled too (same code, one graph serves
    both): each answers with its own weights, also after the copy's weights change."""
    m = _cnn()
    x = torch.randn(1, 3, 20, 20)
    c = zenith.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x), **CONV_TOL)
        m2 = copy.deepcopy(m)
        c2 = zenith.compile(m2)
        torch.testing.assert_close(c2(x), m2(x), **CONV_TOL)
        for p in m2.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        torch.testing.assert_close(c2(x), m2(x), **CONV_TOL)
        torch.testing.assert_close(c(x), m(x), **CONV_TOL)
        assert not torch.allclose(c(x), c2(x), **CONV_TOL)


def test_twelve_copies_compiled_one_by_one_share_one_graph():
    """zenith.compile on each of 12 deep copies (a pool of workers, an ensemble): one
    graph serves them all and each answers with its own weights. A new backend object
    per compile() used to fail Dynamo's backend guard: every copy compiled again, and
    from the ninth on Dynamo's recompile limit sent the calls to eager."""
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).eval()
    x = torch.randn(5, 16)
    g0, s0 = zenith.stats()["graphs_compiled"], zenith.stats()["segments_run"]
    with torch.no_grad():
        for k in range(12):
            m = copy.deepcopy(base)
            m[0].weight.add_(k * 0.1)
            torch.testing.assert_close(zenith.compile(m)(x), m(x), **TOL)
    assert zenith.stats()["graphs_compiled"] - g0 == 1
    assert zenith.stats()["segments_run"] - s0 == 12  # every call ran on Zenith, none in eager


def test_requires_grad_false_then_true():
    """requires_grad_(False) makes a plain call an inference graph (weights may be kept
    packed); requires_grad_(True) afterwards compiles a training graph; both right."""
    m = _gpt2()
    ids = torch.randint(0, 256, (1, 20))
    m.requires_grad_(False)
    c = zenith.compile(m)
    torch.testing.assert_close(c(ids).logits, m(ids).logits, **TOL)  # no no_grad: nothing needs a gradient
    m.requires_grad_(True)
    got = c(ids).logits
    torch.testing.assert_close(got, m(ids).logits, **TOL)
    assert got.requires_grad


def test_parameters_replaced_by_load_state_dict_assign():
    """load_state_dict(..., assign=True) swaps the parameter tensors themselves: the
    compiled model reads the new ones (and any packed copy is remade)."""
    m = _gpt2()
    ids = torch.randint(0, 256, (1, 20))
    c = zenith.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(c(ids).logits, m(ids).logits, **TOL)
        for seed in (1, 2):
            m.load_state_dict(_gpt2(seed=seed).state_dict(), assign=True)
            m.tie_weights()
            torch.testing.assert_close(c(ids).logits, m(ids).logits, **TOL)
    assert m.lm_head.weight is m.transformer.wte.weight


def test_tied_and_shared_weights():
    """GPT-2's LM head is its token embedding (one tensor read twice, once gathered and
    once as a matmul weight), and one Linear used twice in a custom model; a change to
    the shared tensor reaches both uses."""
    m = _gpt2()
    assert m.lm_head.weight is m.transformer.wte.weight
    ids = torch.randint(0, 256, (1, 20))
    c = zenith.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(c(ids).logits, m(ids).logits, **TOL)
        m.transformer.wte.weight.mul_(1.5)
        torch.testing.assert_close(c(ids).logits, m(ids).logits, **TOL)

    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = torch.nn.Linear(48, 48)
            self.w = torch.nn.Parameter(torch.randn(48, 48) / 7)
            self.head = torch.nn.Linear(48, 8)
            self.head2 = torch.nn.Linear(48, 8)
            self.head2.weight = self.head.weight  # shared by two modules

        def forward(self, x):
            y = torch.tanh(self.shared(x)) @ self.w
            y = torch.relu(self.shared(y)) @ self.w
            return self.head(y) + self.head2(y * 2)

    torch.manual_seed(0)
    t, x = Twice().eval(), torch.randn(40, 48)
    ct = zenith.compile(t)
    with torch.no_grad():
        torch.testing.assert_close(ct(x), t(x), **TOL)
        t.w.mul_(-1)
        t.head.weight.add_(0.5)
        torch.testing.assert_close(ct(x), t(x), **TOL)


def test_model_moved_between_dtypes():
    """float32 -> bfloat16 -> float16 -> float32 -> float64 and back, in place
    (module.to): each dtype compiles (guards on dtype) and answers like eager at that
    dtype (float64 runs in PyTorch: Zenith computes in float32 at most)."""
    m = _gpt2()
    ids = torch.randint(0, 256, (1, 20))
    c = zenith.compile(m)
    half = dict(rtol=2e-2, atol=2e-2)
    with torch.no_grad():
        for dtype, tol in ((torch.float32, TOL), (torch.bfloat16, half), (torch.float16, half),
                           (torch.float32, TOL), (torch.float64, dict(rtol=1e-7, atol=1e-9)), (torch.float32, TOL)):
            m.to(dtype)
            got, want = c(ids).logits, m(ids).logits
            assert got.dtype == want.dtype == dtype
            torch.testing.assert_close(got, want, **tol, msg=lambda s: f"{dtype}: {s}")
