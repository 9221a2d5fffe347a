"""How Dynamo's graph reaches ATen: inference graphs that need nothing of
AOTAutograd's machinery are traced directly (backend._direct_inference); every other
graph goes through AOTAutograd. Both must give eager's answers and semantics."""
import pytest
import torch

import zenith
from zenith.backend import collect_reports


class _Block(torch.nn.Module):
    """Linear, LayerNorm, GELU, softmax attention over rows, residual: a small
    transformer-like block."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.qkv, self.out, self.norm = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1) @ v
        return self.norm(x + torch.nn.functional.gelu(self.out(a)))


def _compile_and_run(model, *args, **options):
    with collect_reports() as reports:
        c = zenith.compile(model, **options)
        out = c(*args)
    return out, reports


def test_inference_is_traced_directly_and_matches_aot_and_eager():
    m, x = _Block().eval(), torch.randn(2, 7, 16)
    with torch.no_grad():
        ref = m(x)
        direct, r1 = _compile_and_run(m, x)
        aot, r2 = _compile_and_run(m, x, aot_inference=True)
    assert [r.aten_trace for r in r1] == ["direct"] and [r.aten_trace for r in r2] == ["AOTAutograd"]
    assert r1[0].nodes_native == r1[0].nodes_total > 0 and r1[0].zenith_ops == r2[0].zenith_ops
    torch.testing.assert_close(direct, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(direct, aot, rtol=0, atol=0)
    assert "traced to ATen    direct x1" in str(zenith.explain(m, x))


def test_in_place_ops_on_intermediates_are_traced_directly():
    # ReLU(inplace=True) / ReLU6(inplace=True) / x += y on values the graph made itself
    # (torchvision's CNNs): the direct trace is functionalized, so they need no
    # AOTAutograd, and a value read after an in-place op on it sees the update.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a, self.b, self.act = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.ReLU6(inplace=True)

        def forward(self, x):
            h = self.a(x)
            g = h.clone()
            torch.nn.functional.relu(h, inplace=True)
            h += g  # reads h after relu_ changed it
            return self.act(self.b(h)) * h  # ReLU6(inplace=True) is hardtanh_, as in MobileNet V2

    m, x = M().eval(), torch.randn(3, 8)
    with torch.no_grad():
        ref = m(x)
        direct, r1 = _compile_and_run(m, x)
        aot, r2 = _compile_and_run(m, x, aot_inference=True)
    assert [r.aten_trace for r in r1] == ["direct"] and [r.aten_trace for r in r2] == ["AOTAutograd"]
    torch.testing.assert_close(direct, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(direct, aot, rtol=0, atol=0)


def test_in_place_op_on_an_input_goes_through_aot():
    # An in-place add on an input (and ReLU(inplace=True) inside): the functionalized
    # trace copies the new value back into the input, a mutation, so AOTAutograd runs
    # it; the caller's tensor is updated as in eager.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.seq = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(inplace=True), torch.nn.Linear(8, 4))

        def forward(self, x, counter):
            counter.add_(1)
            return self.seq(x)

    m, x = M().eval(), torch.randn(3, 8)
    counter = torch.zeros(2)
    with torch.no_grad():
        out, reports = _compile_and_run(m, x, counter)
        torch.testing.assert_close(out, m.seq(x))
    assert [r.aten_trace for r in reports] == ["AOTAutograd"]
    assert torch.equal(counter, torch.ones(2))


def test_output_that_views_an_input_goes_through_aot():
    # AOTAutograd hands back a view of the input, as eager does; a fresh buffer would not
    # show the caller's later writes to the input.
    def f(x, w):
        return x.view(-1), x @ w

    x, w = torch.randn(4, 6), torch.randn(6, 3)
    with torch.no_grad():
        (flat, y), reports = _compile_and_run(f, x, w)
    assert [r.aten_trace for r in reports] == ["AOTAutograd"]
    torch.testing.assert_close(y, x @ w)
    x.add_(1.0)
    assert torch.equal(flat, x.view(-1))


@pytest.mark.parametrize("case", ["grad", "dynamic"])
def test_training_and_dynamic_shapes_go_through_aot(case):
    m, x = _Block(), torch.randn(2, 7, 16)
    if case == "grad":  # gradients needed: forward and backward graphs from AOTAutograd
        out, reports = _compile_and_run(m, x)
        out.sum().backward()
        assert m.qkv.weight.grad is not None
    else:
        with torch.no_grad():
            out, reports = _compile_and_run(m, x, dynamic=True)
    assert reports and all(r.aten_trace == "AOTAutograd" for r in reports)
    torch.testing.assert_close(out, m(x), rtol=1e-5, atol=1e-5)
