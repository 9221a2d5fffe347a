"""What a torch.compile backend is expected to honour: options= and mode=, logging
through TORCH_LOGS, typed bindings, and one source of truth for what crosses the
C++/Python boundary (dtype codes)."""
import ast
import dataclasses
import pathlib

import pytest
import torch
import torch._dynamo

import zenith
from zenith import _C
from zenith import backend as zbackend
from zenith.importer import DTYPE_CODES, DTYPES
from zenith.options import MODES, OPTIONS, Options
from zenith.callpath import _raw


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()


def _inner(excinfo):
    """The error a backend raised: Dynamo wraps it in BackendCompilerFailed."""
    e = excinfo.value
    return getattr(e, "inner_exception", None) or e.__cause__ or e


@pytest.fixture
def seen_options(monkeypatch):
    """The options dict every graph compiled in the test reached CompiledGraph with,
    and how it was traced to ATen."""
    seen = []
    real = zbackend._compile_fx

    def spy(gm, example_inputs, options, static_inputs=None, aten_trace="AOTAutograd"):
        seen.append((dict(options), aten_trace))
        return real(gm, example_inputs, options, static_inputs=static_inputs, aten_trace=aten_trace)

    monkeypatch.setattr(zbackend, "_compile_fx", spy)
    torch._dynamo.reset()
    yield seen
    torch._dynamo.reset()


_FLIPPED = {k: not getattr(Options(), k) for k in OPTIONS}


@pytest.mark.parametrize("how", ["torch.compile", "zenith.compile", "zenith.compile(options=)", "make_backend"])
@pytest.mark.parametrize("name", OPTIONS)
def test_every_option_reaches_the_compiler(seen_options, name, how):
    m, x = _mlp(), torch.randn(3, 8)
    value = _FLIPPED[name]
    if how == "torch.compile":
        c = torch.compile(m, backend="zenith", options={name: value})
    elif how == "zenith.compile":
        c = zenith.compile(m, **{name: value})
    elif how == "zenith.compile(options=)":
        c = zenith.compile(m, options={name: value})
    else:
        c = torch.compile(m, backend=zenith.make_backend(**{name: value}))
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))
    assert seen_options, "nothing compiled"
    for options, trace in seen_options:
        if name == "aot_inference":
            assert trace == "AOTAutograd"
        else:
            assert options[name] is value, options
        for other in OPTIONS:  # nothing else changed
            if other not in (name, "aot_inference"):
                assert options[other] == getattr(Options(), other)


def test_torch_compile_options_change_what_runs():
    # passes=False: no pass ran; fallback=False: an op Zenith lacks is an error
    m, x = _mlp(), torch.randn(3, 8)
    torch._dynamo.reset()
    with zbackend.collect_reports() as reports, torch.no_grad():
        torch.compile(m, backend="zenith")(x)
        torch._dynamo.reset()
        torch.compile(m, backend="zenith", options={"passes": False})(x)
    on, off = reports
    assert sum(on.passes.values()) > 0 and off.passes == {}
    assert "fused" not in off.zenith_ops and on.zenith_ops != off.zenith_ops
    torch._dynamo.reset()
    f = torch.compile(lambda t: torch.special.i0(t) + 1, backend="zenith", options={"fallback": False})
    with pytest.raises(Exception, match="fallback=False"):
        f(torch.randn(3))
    torch._dynamo.reset()


def test_torch_compile_make_backend_and_options_combine(seen_options):
    # torch.compile's options apply on top of the backend's own
    m, x = _mlp(), torch.randn(3, 8)
    with torch.no_grad():
        torch.compile(m, backend=zenith.make_backend(verify=True), options={"passes": False})(x)
    assert seen_options and all(o["verify"] is True and o["passes"] is False for o, _ in seen_options)


@pytest.mark.parametrize("options, error, match", [
    ({"passes": False, "bogus": 1}, TypeError, r"unknown option\(s\) bogus; known options: passes, verify, "
                                               r"fallback, pack_weights, aot_inference"),
    ({"passes": 1}, TypeError, r"option 'passes' must be a bool \(True or False\), got int 1"),
    ({"verify": "yes"}, TypeError, r"option 'verify' must be a bool"),
    ({"fallback": None}, TypeError, r"option 'fallback' must be a bool"),
])
def test_bad_options_are_clear_errors(options, error, match):
    # zenith.compile checks at once; torch.compile calls the backend at the first call,
    # where Dynamo wraps the same error
    with pytest.raises(error, match=match):
        zenith.compile(_mlp(), **options)
    with pytest.raises(error, match=match):
        zenith.compile(_mlp(), options=options)
    with pytest.raises(error, match=match):
        zenith.make_backend(**options)
    torch._dynamo.reset()
    c = torch.compile(_mlp(), backend="zenith", options=dict(options))
    with pytest.raises(Exception, match=match) as ei:
        c(torch.randn(2, 8))
    assert isinstance(_inner(ei), error)
    torch._dynamo.reset()


def test_options_must_be_a_dict_and_not_given_twice():
    with pytest.raises(TypeError, match="options must be a dict"):
        zenith.compile(_mlp(), options=[("passes", False)])
    with pytest.raises(TypeError, match="passes given both as keywords and in options="):
        zenith.compile(_mlp(), passes=False, options={"passes": True})


@pytest.mark.parametrize("mode", sorted(MODES))
def test_known_modes_compile_as_documented(seen_options, mode):
    m, x = _mlp(), torch.randn(3, 8)
    expected = dataclasses.replace(Options(), **MODES[mode]).compiler_options()
    for c in (torch.compile(m, backend="zenith", mode=mode), zenith.compile(m, mode=mode)):
        torch._dynamo.reset()
        seen_options.clear()
        with torch.no_grad():
            torch.testing.assert_close(c(x), m(x))
        assert seen_options and all({k: o[k] for k in expected} == expected for o, _ in seen_options)


def test_unknown_mode_is_a_clear_error():
    match = r"unknown mode 'fast'; known modes: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs"
    with pytest.raises(ValueError, match=match):
        zenith.compile(_mlp(), mode="fast")
    torch._dynamo.reset()
    c = torch.compile(_mlp(), backend="zenith", mode="fast")
    with pytest.raises(Exception, match=match) as ei:
        c(torch.randn(2, 8))
    assert isinstance(_inner(ei), ValueError)
    with pytest.raises(TypeError, match="mode must be a string"):
        zenith.compile(_mlp(), mode=3)
    torch._dynamo.reset()


def test_explain_takes_the_same_options():
    r = zenith.explain(_mlp(), torch.randn(2, 8), options={"passes": False}, mode="max-autotune")
    assert r.passes == {} and r.nodes_native == r.nodes_total > 0
    with pytest.raises(TypeError, match="unknown option"):
        zenith.explain(_mlp(), torch.randn(2, 8), pases=False)


def test_dtype_codes_come_from_the_core():
    # Python's torch dtype -> Zenith name table names only dtypes the core declares,
    # and its codes are the core's: a cast to each code yields that dtype, and a tensor
    # of each dtype passed by code to run_raw is read as that dtype.
    assert set(DTYPES.values()) == {d.name for d in _C.DType} == set(DTYPE_CODES)
    for tdtype, name in DTYPES.items():
        g = _C.Graph()
        x = g.add_input("x", "f32", [3])
        (y,) = g.add_node("cast", [x], {"dtype": DTYPE_CODES[name]})
        assert g.value_dtype(y) == name

        g = _C.Graph()
        x = g.add_input("x", name, [3])
        g.set_outputs(g.add_node("cast", [x], {"dtype": _C.DType.f32.value}))
        t = torch.tensor([0, 1, 3]).to(tdtype)
        (out,) = _C.Executable(g).run_raw([_raw(t, [])])
        assert torch.equal(out, t.float()), (name, out)


def test_type_stubs_ship_with_the_package():
    pkg = pathlib.Path(zenith.__file__).parent
    assert (pkg / "py.typed").is_file()
    stub = pkg / "_C.pyi"
    assert stub.is_file(), f"no {stub}: the build did not generate the stubs"
    tree = ast.parse(stub.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert {"Graph", "Executable", "DType", "op_names", "set_num_threads"} <= names
    # generated from this very build: every public name of the module is declared
    assert {n for n in dir(_C) if not n.startswith("_")} <= names
    graph = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Graph")
    add_input = next(f for f in graph.body if isinstance(f, ast.FunctionDef) and f.name == "add_input")
    assert [a.arg for a in add_input.args.args] == ["self", "name", "dtype", "shape"]


_LOG_SCRIPT = """
import sys, torch
if sys.argv[1] == "zenith-first":
    import zenith
f = torch.compile(lambda x: torch.special.i0(torch.sin(x)) * 2, backend="zenith")
f(torch.randn(4))
import logging, zenith, torch._logging._internal as ti
assert ti.log_registry.is_log("zenith")
if sys.argv[2] == "set_logs":  # the API form, in a process without TORCH_LOGS
    torch._dynamo.reset()
    torch._logging.set_logs(modules={"zenith": logging.INFO})
    torch.compile(lambda x: torch.cos(x) + 1, backend="zenith")(torch.randn(3))
"""


def _run_logged(env, *args):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "ZENITH_LOG")} | env
    p = subprocess.run([sys.executable, "-c", _LOG_SCRIPT, *(args or ("torch-first", "-"))], env=env,
                       capture_output=True, text=True, timeout=300)
    return p


@pytest.mark.parametrize("env, debug", [({"TORCH_LOGS": "zenith"}, False), ({"TORCH_LOGS": "+zenith"}, True),
                                        ({"ZENITH_LOG": "info"}, False), ({"ZENITH_LOG": "DEBUG"}, True),
                                        ({"TORCH_LOGS": "zenith", "ZENITH_LOG": "info"}, False), ({}, None)])
def test_torch_logs_zenith_prints_the_compile_summary(env, debug):
    p = _run_logged(env)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = [line for line in p.stderr.splitlines() if "zenith: compiled graph:" in line]
    fallback = [line for line in p.stderr.splitlines() if "runs in PyTorch" in line]
    ir = [line for line in p.stderr.splitlines() if "after passes:" in line]
    if debug is None:  # nothing asked, nothing printed
        assert not summary and not fallback and not ir, p.stderr[-3000:]
        return
    assert len(summary) == 1, p.stderr[-3000:]  # once: ZENITH_LOG with TORCH_LOGS does not double it
    assert "nodes native in 2 segment(s), 1 fallback op type(s)" in summary[0]
    assert len(fallback) == 1 and "aten.i0" in fallback[0] and "no Zenith kernel" in fallback[0]
    assert summary[0].startswith("I") and "partition.py" in summary[0]  # PyTorch's log format, either way
    assert bool(ir) == debug


def test_logging_works_whichever_is_imported_first_and_through_set_logs():
    p = _run_logged({"TORCH_LOGS": "zenith"}, "zenith-first", "-")
    assert p.returncode == 0 and "zenith: compiled graph:" in p.stderr, p.stderr[-3000:]
    p = _run_logged({}, "torch-first", "set_logs")
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [line for line in p.stderr.splitlines() if "zenith: compiled graph:" in line]
    assert len(lines) == 1 and "1 segment(s)" in lines[0], p.stderr[-3000:]  # the graph after set_logs only


def test_bad_zenith_log_level_is_a_clear_error():
    p = _run_logged({"ZENITH_LOG": "loud"}, "zenith-first", "-")
    assert p.returncode != 0
    assert "ZENITH_LOG='loud' is not a log level; use one of debug, info, warning, error" in p.stderr
