"""What a torch.compile backend is expected to honour: options= and mode=, logging
through TORCH_LOGS, typed bindings, and one source of truth for what crosses the
C++/Python boundary (dtype codes)."""
import ast
import pathlib

import torch

import zenith
from zenith import _C
from zenith.importer import DTYPE_CODES, DTYPES
from zenith.partition import _raw


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
    assert {"Graph", "Executable", "DType", "op_names", "set_num_threads"} <= names
    # generated from this very build: every public name of the module is declared
    assert {n for n in dir(_C) if not n.startswith("_")} <= names
    graph = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Graph")
    add_input = next(f for f in graph.body if isinstance(f, ast.FunctionDef) and f.name == "add_input")
    assert [a.arg for a in add_input.args.args] == ["self", "name", "dtype", "shape"]
