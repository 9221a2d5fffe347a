"""Programs the fuzzer found failing, kept as regression tests once fixed (each names
the bug). Paste the shrunk `Program(...)` literal a failing fuzz run prints."""
import pytest
import torch

from programs import Input, Program, Step, run_case

f32, b8 = torch.float32, torch.bool

REGRESSIONS = {
    # fuse_attention_layout left the permute back reading sdpa's re-typed result; the
    # verifier (run after every pass in tests) rejected every fused attention.
    "attention_layout_verifies": Program(
        inputs=[Input((1, 3, 8), f32, "contig", 0.0)] * 3,
        steps=[Step("attention", (0, 1, 2), {"heads": 2, "causal": False})], outputs=[3], seed=1),
    # A NaN key: PyTorch's CPU sdpa returns 0 for the queries that see it, Zenith NaN, as
    # softmax's definition does (the float64 arbiter computes it by definition).
    "attention_nan_key_row_is_nan": Program(
        inputs=[Input((1, 3, 8), f32, "contig", 0.0), Input((1, 3, 8), f32, "contig", 0.5),
                Input((1, 3, 8), f32, "contig", 0.0)],
        steps=[Step("attention", (0, 1, 2), {"heads": 1, "causal": True})], outputs=[3], seed=418981098),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_fuzz_regression(name):
    run_case(REGRESSIONS[name])
