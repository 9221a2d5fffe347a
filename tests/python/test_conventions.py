"""What a torch.compile backend is expected to honour: options= and mode=, logging
through TORCH_LOGS, typed bindings, and one source of truth for what crosses the
C++/Python boundary (dtype codes)."""
import torch

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

