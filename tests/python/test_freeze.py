"""zenith.freeze: the whole model through torch.export and Zenith, weights bound once.
Every output is compared with eager's (fp32, tolerance 1e-4 relative to the output's
scale unless stated); the contract's edges (in-place changes seen, replacements not,
new signatures recaptured, refusals) each have a case."""
import threading

import pytest
import torch
import torch.nn as nn

import zenith
from zenith.backend import collect_reports
from zenith.freeze import MAX_SIGNATURES


def close(a, b, tol=1e-4):
    scale = max(1.0, b.abs().max().item())
    assert a.shape == b.shape and a.dtype == b.dtype
    assert (a - b).abs().max().item() <= tol * scale, (a - b).abs().max().item()


class InvertedResidual(nn.Module):
    """A MobileNet V2 block and head: 1x1 expand, depthwise 3x3, 1x1 project, residual."""

    def __init__(self, c=8, e=24, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU6())
        self.block = nn.Sequential(
            nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e), nn.ReLU6(),
            nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False), nn.BatchNorm2d(e), nn.ReLU6(),
            nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c))
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        y = self.stem(x)
        y = y + self.block(y)
        return self.fc(y.mean((2, 3)))


def cnn():
    m = InvertedResidual()
    with torch.no_grad():  # statistics of their own, so the folded norms are not identities
        for bn in m.modules():
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.2, 0.2)
    return m.eval()


def test_cnn_matches_eager_and_runs_natively():
    m = cnn()
    x = torch.randn(2, 3, 13, 11)
    with collect_reports() as reports:
        f = zenith.freeze(m)
        out = f(x)
    close(out, m(x).detach())
    assert not out.requires_grad
    (r,) = reports
    assert r.aten_trace == "export" and r.nodes_native == r.nodes_total and not r.fallback_ops
    assert f.reports == [r]


def test_outputs_kwargs_and_constant_arguments():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 4)

        def forward(self, x, scale=2, *, y=None):
            out = self.lin(x) * scale
            return {"a": out, "b": (out + y, x.sum())}

    m = M().eval()
    f = zenith.freeze(m)
    x, y = torch.randn(3, 6), torch.randn(3, 4)
    for scale in (3, 5, 3):  # each value of a constant argument is a signature of its own
        got, want = f(x, scale, y=y), m(x, scale, y=y)
        assert set(got) == {"a", "b"} and isinstance(got["b"], tuple)
        close(got["a"], want["a"].detach())
        close(got["b"][0], want["b"][0].detach())
        close(got["b"][1], want["b"][1])
    assert len(f.reports) == 2


def test_new_shapes_recapture_and_old_ones_are_dropped():
    m = cnn()
    f = zenith.freeze(m)
    for n in range(1, MAX_SIGNATURES + 3):
        x = torch.randn(n, 3, 8, 8)
        close(f(x), m(x).detach())
    assert len(f._graphs) == MAX_SIGNATURES
    x = torch.randn(1, 3, 8, 8)  # dropped, so captured again
    with collect_reports() as again:
        close(f(x), m(x).detach())
    assert len(again) == 1
    xc = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)  # other strides: its own capture
    with collect_reports() as again:
        close(f(xc), m(xc).detach())
    assert len(again) == 1


def test_in_place_weight_changes_are_seen():
    m = cnn()
    f = zenith.freeze(m)
    x = torch.randn(1, 3, 9, 9)
    close(f(x), m(x).detach())
    with torch.no_grad():
        m.stem[0].weight.mul_(-1.5)  # a packed conv filter
        m.block[4].running_var.mul_(3.0)  # a folded norm's statistics
        m.fc.bias.add_(1.0)
    close(f(x), m(x).detach())
    m.load_state_dict(cnn().state_dict())
    close(f(x), m(x).detach())


def test_replaced_weights_are_not_seen():
    m = cnn()
    f = zenith.freeze(m)
    x = torch.randn(1, 3, 9, 9)
    before = f(x)  # the first call captures, binding the tensors of that moment
    close(before, m(x).detach())
    m.fc.weight = nn.Parameter(torch.randn_like(m.fc.weight))  # bound at capture: not seen
    m.stem[0].weight.data = torch.randn(8, 3, 3, 3)
    close(f(x), before)
    assert (m(x) - before).abs().max() > 1e-3
    close(zenith.freeze(m)(x), m(x).detach())  # freezing again sees them


def test_refusals_are_clear():
    m = cnn()
    with pytest.raises(RuntimeError, match="training mode.*eval"):
        zenith.freeze(m.train())
    m.eval()
    m.block[1].train()  # one submodule training is enough to refuse
    with pytest.raises(RuntimeError, match="block.1 is in training mode"):
        zenith.freeze(m)
    m.eval()
    f = zenith.freeze(m)
    f(torch.randn(1, 3, 8, 8))
    m.train()  # after freeze: the next capture refuses, the captured signature still runs as frozen
    with pytest.raises(RuntimeError, match="training mode"):
        f(torch.randn(2, 3, 8, 8))
    m.eval()
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(RuntimeError, match="autocast"):
        f(torch.randn(1, 3, 8, 8))
    with pytest.raises(RuntimeError, match="runs on CPU.*meta"):
        f(torch.randn(1, 3, 8, 8, device="meta"))
    with pytest.raises(RuntimeError, match="requires grad"):
        f(torch.randn(1, 3, 8, 8, requires_grad=True))
    xg = torch.randn(1, 3, 8, 8, requires_grad=True)
    with torch.no_grad():  # no autograd graph is asked for: fine
        close(f(xg), m(xg))
    with pytest.raises(TypeError, match="unknown option"):
        zenith.freeze(m, bogus=True)
    with pytest.raises(TypeError, match="takes an nn.Module"):
        zenith.freeze(torch.sin)

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x):
            self.calls.add_(1)
            return x * 2

    with pytest.raises(RuntimeError, match="writes into its buffers"):
        zenith.freeze(Counter().eval())(torch.randn(3))

    with pytest.raises(TypeError, match="neither a tensor nor a hashable"):
        zenith.freeze(nn.Identity().eval())(torch.randn(2), [{1, 2}])


def test_transformer_with_keywords_and_model_output():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=120, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=96, max_position_embeddings=64)
    m = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 120, (2, 17))
    mask = torch.ones_like(ids)
    mask[1, 11:] = 0
    f = zenith.freeze(m)
    got = f(input_ids=ids, attention_mask=mask)
    want = m(input_ids=ids, attention_mask=mask)
    assert type(got) is type(want)
    close(got.last_hidden_state, want.last_hidden_state.detach())
    close(got.pooler_output, want.pooler_output.detach())
    assert f.reports[0].nodes_native == f.reports[0].nodes_total


def test_concurrent_calls():
    m = cnn()
    f = zenith.freeze(m)
    xs = [torch.randn(2, 3, 10, 10) for _ in range(4)]
    want = [m(x).detach() for x in xs]
    f(xs[0])  # captured once, before the threads race to call it
    errors = []

    def worker(k):
        try:
            for _ in range(25):
                j = (k + _) % 4
                close(f(xs[j]), want[j])
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_first_capture_races():
    """Threads making the first call at once: one capture, every answer right."""
    m = cnn()
    f = zenith.freeze(m)
    x = torch.randn(2, 3, 10, 10)
    want = m(x).detach()
    errors, go = [], threading.Barrier(4)

    def worker():
        try:
            go.wait()
            close(f(x), want)
        except Exception as e:  # reported below
            errors.append(e)

    with collect_reports() as reports:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert len(reports) == 1 and len(f._graphs) == 1


def test_inference_mode_and_inference_tensor_weights():
    """A first call under torch.inference_mode, and a model made under it (its weights
    inference tensors, which keep no version counter): right answers, and an in-place
    change to such a weight is seen (they are read in place, never kept packed)."""
    m = cnn()
    f = zenith.freeze(m)
    x = torch.randn(1, 3, 9, 9)
    with torch.inference_mode():
        out = f(x)
    close(out, m(x).detach())
    close(f(x), m(x).detach())
    with torch.inference_mode():
        mi = cnn()
    fi = zenith.freeze(mi)
    with torch.no_grad():
        close(fi(x), mi(x))
    with torch.inference_mode():
        mi.stem[0].weight.mul_(-1.5)
        mi.fc.bias.add_(1.0)
    with torch.no_grad():
        close(fi(x), mi(x))


class Passes(nn.Module):
    """Returns its input, a parameter and a computed value; `bias` may be None."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.scale = nn.Parameter(torch.randn(3))

    def forward(self, x, bias=None):
        y = self.lin(x) * self.scale
        return x, self.scale, y if bias is None else y + bias


def test_none_arguments_and_returned_inputs_and_parameters():
    m = Passes().eval()
    f = zenith.freeze(m)
    x, b = torch.randn(2, 4), torch.randn(3)
    with torch.no_grad():
        for args in ((x,), (x, None), (x, b)):
            got, want = f(*args), m(*args)
            assert got[0] is x  # an input returned is the input (as eager returns it)
            assert torch.equal(got[1], want[1]) and not got[1].requires_grad
            close(got[2], want[2])
    assert len(f._graphs) == 3  # None is a constant of its signature


def test_least_recently_called_signature_is_dropped():
    m = cnn()
    f = zenith.freeze(m)
    xs = [torch.randn(n, 3, 8, 8) for n in range(1, MAX_SIGNATURES + 2)]
    for x in xs[:MAX_SIGNATURES]:
        f(x)
    f(xs[0])  # called again: now the most recent
    f(xs[-1])  # a new signature drops the least recently called, xs[1]'s
    with collect_reports() as again:
        close(f(xs[0]), m(xs[0]).detach())
    assert not again
    with collect_reports() as again:
        close(f(xs[1]), m(xs[1]).detach())
    assert len(again) == 1


class DataDependent(nn.Module):
    def forward(self, x):
        return x if x.sum() > 0 else -x


def test_a_model_export_cannot_capture_is_a_clear_error():
    f = zenith.freeze(DataDependent().eval())
    with pytest.raises(RuntimeError, match="torch.export could not capture the model.*graph breaks"):
        f(torch.randn(2, 3))


class WeightThroughPyTorch(nn.Module):
    """A weight read by an op Zenith has no kernel for (special.i0, run in PyTorch) and
    by a native one: the frozen call reads its bound weights as its own globals."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)
        self.w = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return self.lin(x) * torch.special.i0(self.w) + self.w


def test_bound_weights_reach_fallback_ops_and_in_place_changes_are_seen():
    m = WeightThroughPyTorch().eval()
    x = torch.randn(4, 5)
    with collect_reports() as reports:
        f = zenith.freeze(m)
        close(f(x), m(x).detach())
    (r,) = reports
    assert any("i0" in k for k in r.fallback_ops), r.fallback_ops
    with torch.no_grad():
        m.w.mul_(-2.0)  # read by the fallback op and by the native multiply
        m.lin.weight.add_(0.5)
    close(f(x), m(x).detach())


def test_positional_and_keyword_calls_are_signatures_of_their_own():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, y):
            return self.lin(x) - y

    m = Two().eval()
    f = zenith.freeze(m)
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    with torch.no_grad():
        close(f(x, y), m(x, y))  # tensors by position: keyed without pytree
        close(f(x, y=y), m(x, y=y))  # a keyword: the general key
        close(f(y, x), m(y, x))  # same signature by position: no new capture
        p = nn.Parameter(x.clone(), requires_grad=False)  # a Tensor subclass: a leaf, the same signature
        close(f(p, y), m(p, y))
    assert len(f._graphs) == 2
    x3 = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match="requires grad"):
        f(x3.requires_grad_(), y)  # checked on the positional path too


def test_frozen_calls_run_the_pinned_call(monkeypatch):
    """A frozen model's calls go through the graph's pinned call (its weights as globals,
    checked by WeightWatch.pinned), never the general one that takes every weight as an
    argument and checks them by id (WeightWatch.check)."""
    from zenith.weights import WeightWatch

    m = cnn()
    f = zenith.freeze(m)
    x = torch.randn(1, 3, 8, 8)
    close(f(x), m(x).detach())

    def general(self, args):
        raise AssertionError("the general call ran")

    monkeypatch.setattr(WeightWatch, "check", general)
    with torch.no_grad():
        m.stem[0].weight.mul_(0.5)  # still seen through the pinned check
    close(f(x), m(x).detach())
    (frozen,) = f._graphs.values()
    assert "(pinned)" in frozen._call.__code__.co_filename and "_check()" in frozen.graph.pinned_source


def test_pinned_call_wants_every_static_input():
    m = cnn()
    f = zenith.freeze(m)
    f(torch.randn(1, 3, 8, 8))
    (frozen,) = f._graphs.values()
    with pytest.raises(RuntimeError, match="tensors to pin"):
        frozen.graph.pin(frozen.bound[:-1])
