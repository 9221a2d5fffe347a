"""Model files: zenith.export writes, zenith.load and the zenith-run binary (no Python)
run them. Every output is compared with eager's (tolerance 1e-4 relative to the output's
scale; exact for integers); refusals and damaged input each have a case."""
import os
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn as nn
import torchvision
import transformers
from safetensors.torch import load_file, save_file

import zenith
from zenith.model_file import RUN_BINARY


def close(a, b, tol=1e-4):
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    if not b.is_floating_point():
        assert torch.equal(a, b)
        return
    scale = max(1.0, b.abs().max().item())
    assert (a - b).abs().max().item() <= tol * scale, (a - b).abs().max().item()


def run_binary(*args):
    """zenith-run with an empty environment: no PYTHONPATH, no Python anywhere near it."""
    return subprocess.run([str(RUN_BINARY), *map(str, args)], capture_output=True, text=True, env={}, timeout=300)


def test_the_binary_links_no_python():
    assert RUN_BINARY.is_file()
    libs = subprocess.run(["ldd", str(RUN_BINARY)], capture_output=True, text=True, check=True).stdout
    assert "python" not in libs.lower(), libs


def test_loaded_models_and_the_binary_take_the_thread_count_users_set(tmp_path):
    """zenith.load's calls run on torch.get_num_threads() threads from the first call of a
    fresh process (they ran on one until something compiled had run); zenith-run, and any
    C++ program, on OpenMP's count unless told (OMP_NUM_THREADS, else the CPUs it may use)."""
    path = tmp_path / "linear.zenith"
    zenith.export(nn.Linear(8, 4).eval(), (torch.randn(3, 8),), path)
    prog = ("import sys, torch, zenith; m = zenith.load(sys.argv[1]); torch.set_num_threads(int(sys.argv[2])); "
            "m(torch.randn(3, 8)); print(zenith._C.num_threads()); "
            "zenith._C.set_num_threads(5); m(torch.randn(3, 8)); print(zenith._C.num_threads())")  # (as a compiled call sets it)
    for n in (1, 2, 3):
        r = subprocess.run([sys.executable, "-c", prog, str(path), str(n)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.split()[-2:] == [str(n)] * 2, r.stdout + r.stderr
    for env, want in (({"OMP_NUM_THREADS": "3"}, 3), ({"OMP_NUM_THREADS": "1"}, 1)):
        r = subprocess.run([str(RUN_BINARY), str(path), "--random", "--iterations", "1"], capture_output=True,
                           text=True, env=env, timeout=300)
        assert r.returncode == 0 and f"on {want} thread(s)" in r.stdout, r.stdout + r.stderr
    r = run_binary(path, "--random", "--iterations", "1", "--threads", "2")
    assert r.returncode == 0 and "on 2 thread(s)" in r.stdout, r.stdout + r.stderr


def test_resnet_file_runs_in_python_and_in_the_binary(tmp_path):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(2, 3, 64, 64)
    path = tmp_path / "resnet18.zenith"
    loaded = zenith.export(model, (x,), path)
    with torch.no_grad():
        ref = model(x)
    assert loaded.inputs == [("x", torch.float32, (2, 3, 64, 64))]
    x2 = torch.randn(2, 3, 64, 64)  # other values than the example's
    with torch.no_grad():
        close(zenith.load(path)(x2), model(x2))
    # The binary, from safetensors in and out.
    save_file({"x": x}, tmp_path / "in.safetensors")
    r = run_binary(path, "--input", tmp_path / "in.safetensors", "--output", tmp_path / "out.safetensors",
                   "--threads", 2, "--iterations", 2)
    assert r.returncode == 0, r.stderr
    assert "median" in r.stdout and "output 0: f32[2, 10]" in r.stdout
    close(load_file(tmp_path / "out.safetensors")["0"], ref)
    # Without inputs it describes the model.
    r = run_binary(path)
    assert r.returncode == 0 and "input x: f32[2, 3, 64, 64]" in r.stdout, r.stdout + r.stderr
    r = run_binary(path, "--random")
    assert r.returncode == 0, r.stderr


def tiny_bert():
    """A 2-layer BERT (random init, seed 0) and example inputs: ids and a mask, [2, 12]."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                                  vocab_size=500)
    ids = torch.randint(0, cfg.vocab_size, (2, 12))
    return transformers.BertModel(cfg).eval(), ids, torch.ones(2, 12, dtype=torch.int64)


def test_transformer_with_keyword_inputs_keeps_its_output_structure(tmp_path):
    model, ids, mask = tiny_bert()
    cfg = model.config
    mask[1, 7:] = 0
    loaded = zenith.export(model, (ids,), tmp_path / "bert.zenith", kwargs={"attention_mask": mask})
    assert [n for n, _, _ in loaded.inputs] == ["input_ids", "attention_mask"]
    out = loaded(ids, mask)
    with torch.no_grad():
        ref = model(ids, attention_mask=mask)
    assert type(out) is type(ref)
    close(out.last_hidden_state, ref.last_hidden_state)
    close(out.pooler_output, ref.pooler_output)
    # The binary reads the inputs by name; a missing one is named in the error.
    save_file({"input_ids": ids, "attention_mask": mask}, tmp_path / "in.safetensors")
    r = run_binary(tmp_path / "bert.zenith", "--input", tmp_path / "in.safetensors", "--output", tmp_path / "o.st")
    assert r.returncode == 0, r.stderr
    outs = load_file(tmp_path / "o.st")
    close(outs["0"], ref.last_hidden_state)
    close(outs["1"], ref.pooler_output)
    save_file({"input_ids": ids}, tmp_path / "part.safetensors")
    r = run_binary(tmp_path / "bert.zenith", "--input", tmp_path / "part.safetensors")
    assert r.returncode == 1 and "no tensor named attention_mask" in r.stderr, r.stderr


def test_inputs_come_in_call_order_whatever_the_graph_reads_first(tmp_path):
    class M(nn.Module):
        def forward(self, a, b):
            return (b * 2).sum(1, keepdim=True) + a

    a, b = torch.randn(3, 1), torch.randn(3, 5)
    loaded = zenith.export(M().eval(), (a, b), tmp_path / "m.zenith")
    assert [n for n, _, _ in loaded.inputs] == ["a", "b"]
    close(loaded(a, b), M()(a, b))


def test_quantized_model_exports(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                                  vocab_size=300)
    model = zenith.quantize(transformers.BertModel(cfg).eval(), "int8-dynamic")
    ids = torch.randint(0, cfg.vocab_size, (1, 16))
    loaded = zenith.export(model, (ids,), tmp_path / "q.zenith")
    with torch.no_grad():
        ref = model(ids).last_hidden_state
    close(loaded(ids).last_hidden_state, ref, tol=1e-3)  # the quantized model's eager form rounds alike
    assert "qmatmul" in loaded.graph_text


def test_concurrent_calls_agree(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)).eval()
    loaded = zenith.export(model, (torch.randn(4, 32),), tmp_path / "mlp.zenith")
    xs = [torch.randn(4, 32) for _ in range(8)]
    with torch.no_grad():
        refs = [model(x) for x in xs]
    errors = []

    def work(k):
        try:
            for _ in range(20):
                close(loaded(xs[k]), refs[k])
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_refusals_are_clear(tmp_path):
    class Det(nn.Module):
        def forward(self, x):
            return torch.linalg.det(x)

    with pytest.raises(RuntimeError, match="native graphs only.*det"):
        zenith.export(Det().eval(), (torch.randn(3, 3),), tmp_path / "d.zenith")
    assert not (tmp_path / "d.zenith").exists()
    with pytest.raises(RuntimeError, match="training mode"):
        zenith.export(nn.Dropout(0.5), (torch.randn(3),), tmp_path / "t.zenith")
    with pytest.raises(TypeError, match="nn.Module"):
        zenith.export(lambda x: x, (torch.randn(3),), tmp_path / "f.zenith")


def test_wrong_inputs_and_damaged_files_are_clear_errors(tmp_path):
    model = nn.Linear(8, 4).eval()
    path = tmp_path / "lin.zenith"
    loaded = zenith.export(model, (torch.randn(2, 8),), path)
    with pytest.raises(TypeError, match="takes 1 tensors"):
        loaded()
    with pytest.raises(RuntimeError, match=r"torch.float32\[3, 8\], the model takes torch.float32\[2, 8\]"):
        loaded(torch.randn(3, 8))
    with pytest.raises(RuntimeError, match="the model takes"):
        loaded(torch.randn(2, 8, dtype=torch.float64))
    data = path.read_bytes()
    (tmp_path / "cut.zenith").write_bytes(data[: len(data) - 16])
    with pytest.raises(RuntimeError, match="fall outside"):
        zenith.load(tmp_path / "cut.zenith")
    save_file({"w": torch.zeros(2)}, tmp_path / "plain.safetensors")
    with pytest.raises(RuntimeError, match="not a Zenith model file"):
        zenith.load(tmp_path / "plain.safetensors")
    r = run_binary(tmp_path / "cut.zenith")
    assert r.returncode == 1 and "fall outside" in r.stderr
    r = run_binary(path, "--bogus")
    assert r.returncode == 2 and "unknown option" in r.stderr
    # The file is a plain safetensors file too: the weight under its state-dict name.
    tensors = load_file(path)
    close(tensors["input/weight"], model.weight.detach())
    os.remove(path)


def test_a_file_that_does_not_match_eager_is_removed(tmp_path, monkeypatch):
    # A softmax over many classes: every value ~1e-4, so a check against the largest
    # magnitude with a floor at 1 would pass an all-zero output.
    model = nn.Sequential(nn.Linear(16, 10000), nn.Softmax(-1)).eval()
    x = torch.randn(2, 16)
    real_call = zenith.model_file.LoadedModel.__call__
    monkeypatch.setattr(zenith.model_file.LoadedModel, "__call__", lambda self, *a: torch.zeros_like(real_call(self, *a)))
    with pytest.raises(RuntimeError, match="does not match eager.*removed"):
        zenith.export(model, (x,), tmp_path / "s.zenith")
    assert not (tmp_path / "s.zenith").exists()
    monkeypatch.setattr(zenith.model_file.LoadedModel, "__call__", lambda self, *a: real_call(self, *a) * 1.01)
    with pytest.raises(RuntimeError, match="does not match eager"):
        zenith.export(model, (x,), tmp_path / "s.zenith")
    monkeypatch.undo()
    zenith.export(model, (x,), tmp_path / "s.zenith")  # and the real file passes
    assert (tmp_path / "s.zenith").exists()


def test_permuted_weight_and_half_precision_storage(tmp_path):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 4).t())  # [4, 8], stored transposed

        def forward(self, x):
            return torch.relu(x @ self.w)

    model = M().eval()
    x = torch.randn(3, 4)
    close(zenith.export(model, (x,), tmp_path / "p.zenith")(x), model(x).detach())
    for dtype in (torch.float16, torch.bfloat16):
        lin = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8)).to(dtype).eval()
        xh = torch.randn(4, 32).to(dtype)
        out = zenith.export(lin, (xh,), tmp_path / "h.zenith")(xh)
        assert out.dtype == dtype
        with torch.no_grad():
            close(out.float(), lin(xh).float(), tol=2e-2)


def test_keyword_inputs_keep_the_order_given_and_a_fresh_process_restores_the_outputs(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                  vocab_size=200)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 200, (1, 8))
    mask = torch.ones(1, 8, dtype=torch.int64)
    types = torch.zeros(1, 8, dtype=torch.int64)
    path = tmp_path / "b.zenith"
    loaded = zenith.export(model, (ids,), path, kwargs={"token_type_ids": types, "attention_mask": mask})
    assert [n for n, _, _ in loaded.inputs] == ["input_ids", "token_type_ids", "attention_mask"]
    # A process that has not imported transformers: the output type is imported from its name.
    code = ("import sys, torch, zenith; m = zenith.load(sys.argv[1]); "
            "print('transformers' in sys.modules, type(m(*[torch.zeros(s, dtype=d) for _, d, s in m.inputs])).__name__)")
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "BaseModelOutputWithPoolingAndCrossAttentions", r.stdout


def test_symbolic_batch_and_length_one_file_for_every_size(tmp_path):
    """dynamic_shapes makes the batch and sequence length symbols: one file runs every size
    in their ranges (torch.export's), in Python and in the binary (--dim sizes --random's
    inputs); a size out of range, or two inputs disagreeing on a symbol, is a clear error."""
    from torch.export import Dim

    model, ids, mask = tiny_bert()
    cfg = model.config
    batch, length = Dim("batch", max=16), Dim("length", min=2, max=64)
    path = tmp_path / "bert.zenith"
    loaded = zenith.export(model, (ids,), path, kwargs={"attention_mask": mask},
                           dynamic_shapes={"input_ids": {0: batch, 1: length}, "attention_mask": {0: batch, 1: length}})
    (_, _, (b, s)), (_, _, dims) = loaded.inputs
    assert isinstance(b, str) and isinstance(s, str) and dims == (b, s), loaded.inputs
    assert loaded.symbols == {b: ("input_ids dim 0", 0, 16), s: ("input_ids dim 1", 2, 64)}, loaded.symbols
    fresh = zenith.load(path)
    for n, L in ((1, 2), (3, 37), (16, 64), (2, 12)):
        i = torch.randint(0, cfg.vocab_size, (n, L))
        m = torch.ones(n, L, dtype=torch.int64)
        m[0, L // 2:] = 0
        with torch.no_grad():
            ref = model(i, attention_mask=m)
        out = fresh(i, m)
        close(out.last_hidden_state, ref.last_hidden_state)
        close(out.pooler_output, ref.pooler_output)
    with pytest.raises(RuntimeError, match=rf"dim 1 \({s}\) takes sizes 2..64"):
        fresh(torch.zeros(1, 65, dtype=torch.int64), torch.ones(1, 65, dtype=torch.int64))
    with pytest.raises(RuntimeError, match=rf"its dim 1 is {s}, which input_ids dim 1 made 5"):
        fresh(torch.zeros(1, 5, dtype=torch.int64), torch.ones(1, 6, dtype=torch.int64))
    with pytest.raises(RuntimeError, match=rf"the model takes torch.int64\[{b}, {s}\]"):
        fresh(torch.zeros(1, 5, 1, dtype=torch.int64), torch.ones(1, 5, dtype=torch.int64))
    r = run_binary(path)
    assert r.returncode == 0 and f"input input_ids: i64[{b}, {s}]" in r.stdout, r.stdout + r.stderr
    assert f"symbol {s} (input_ids dim 1): sizes 2..64" in r.stdout, r.stdout
    r = run_binary(path, "--random", "--dim", f"{b}=3", "--dim", f"{s}=20")
    assert r.returncode == 0 and "output 0: f32[3, 20, 64]" in r.stdout, r.stdout + r.stderr
    r = run_binary(path, "--random", "--dim", f"{b}=3")
    assert r.returncode == 1 and f"give --dim {s}=N" in r.stderr, r.stderr
    r = run_binary(path, "--random", "--dim", f"{b}=3", "--dim", f"{s}=99")
    assert r.returncode == 1 and "takes sizes 2..64" in r.stderr, r.stderr
    r = run_binary(path, "--random", "--dim", f"{b}=3", "--dim", f"{s}=9", "--dim", "s999=1")
    assert r.returncode == 1 and "--dim s999: no input dim is that symbol" in r.stderr, r.stderr


def test_symbolic_batch_cnn_keeps_the_blocked_layout_and_fusions(tmp_path):
    """A CNN with a symbolic batch compiles as a static one does: its convs in the blocked
    layout (max pooling too), residual adds in the convs, MobileNet's blocks fused; every
    batch matches eager."""
    from torch.export import Dim

    torch.manual_seed(0)
    for model, want in ((torchvision.models.resnet18(num_classes=10), ("conv2d_nchwc", "max_pool2d_nchwc")),
                        (torchvision.models.mobilenet_v2(num_classes=10), ("conv2d_nchwc", "conv2d_pw_dw"))):
        model = model.eval()
        loaded = zenith.export(model, (torch.randn(2, 3, 112, 112),), tmp_path / "cnn.zenith",
                               dynamic_shapes=({0: Dim("batch", max=8)},))
        text = loaded.graph_text
        assert all(f"= {op}(" in text for op in want), text
        assert "= conv2d(" not in text and "= add(" not in text and "= max_pool2d(" not in text, text
        for n in (1, 3, 8):
            x = torch.randn(n, 3, 112, 112)
            with torch.no_grad():
                close(loaded(x), model(x))


def test_derived_dims_examples_of_size_one_and_unbounded_dims(tmp_path):
    from torch.export import Dim

    class M(nn.Module):
        def forward(self, a, b):
            return a.reshape(-1) + b

    half = Dim("half", min=1, max=32)
    with pytest.raises(RuntimeError, match="input b dim 0 is sized by an expression"):
        zenith.export(M().eval(), (torch.randn(3, 2), torch.randn(6)), tmp_path / "m.zenith",
                      dynamic_shapes=({0: half}, {0: 2 * half}))
    assert not (tmp_path / "m.zenith").exists()
    # An example of size 1 on a symbolic dim: torch.export fixes it, and export says how to avoid that.
    with pytest.raises(RuntimeError, match="give examples whose symbolic dims are 2 or more"):
        zenith.export(nn.Linear(4, 3).eval(), (torch.randn(1, 4),), tmp_path / "m.zenith",
                      dynamic_shapes=({0: Dim("batch")},))
    # A Dim without a max: the file's range has none either, and a large batch runs.
    linear = nn.Linear(4, 3).eval()
    loaded = zenith.export(linear, (torch.randn(3, 4),), tmp_path / "m.zenith", dynamic_shapes=({0: Dim("batch")},))
    (sym, (by, lo, hi)), = loaded.symbols.items()
    assert (by, hi) == ("input dim 0", None) and lo in (0, 2), loaded.symbols
    x = torch.randn(1000, 4)
    with torch.no_grad():
        close(loaded(x), linear(x))
