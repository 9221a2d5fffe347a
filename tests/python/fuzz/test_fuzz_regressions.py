"""Programs the fuzzer found failing, kept as regression tests once fixed (each names
the bug). Paste the shrunk `Program(...)` literal a failing fuzz run prints."""
import pytest
import torch

from programs import Input, Program, Step, run_case

f32, f16, bf16, i64, b8 = torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool

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
    # A NaN in V at a key no causal query before it sees: each masked key weighs 0 and
    # 0 x NaN is NaN by the definition (and in eager up to 512 keys); Zenith's tiled path skipped the keys
    # past a block's last query and said -inf (V's -infs) there. The first 10 inputs only
    # advance the input generator to the failing draw.
    "attention_causal_skipped_nan_value": Program(
        inputs=[Input((1,), f32, "step", 0.05), Input((1, 1, 1), f32, "t", 0.05), Input((1, 16), f32, "t", 0.05),
                Input((16,), f32, "step", 0.0), Input((16,), f32, "step", 0.0), Input((1, 16), f32, "t", 0.05),
                Input((1,), b8, "step", 0.0), Input((1,), f32, "step", 0.05), Input((), f32, "contig", 0.05),
                Input((1, 3, 1, 2), f32, "t", 0.05), Input((1, 17, 8), f32, "contig", 0.0),
                Input((1, 17, 8), f32, "contig", 0.0), Input((1, 17, 8), f32, "contig", 0.05)],
        steps=[Step("attention", (10, 11, 12), {"heads": 1, "causal": True})], outputs=[13], seed=2),
    # var_mean's mean of [inf, -1.3]: eager's kernel says NaN (its running update takes
    # inf - inf), Zenith inf, as sum / n does (the arbiter computes it by definition).
    "var_mean_mean_of_inf_is_inf": Program(
        inputs=[Input((2, 1, 1, 16), f32, "t", 0.05)],
        steps=[Step("var_mean", (0,), {"dim": 0, "which": 1})], outputs=[1], seed=0),
    # cos of a value near 1e28 that a 1e30 value in attention's V produced: noise in any
    # float32 implementation, so the arbiter leaves it unjudged (it judged it wrongly).
    "cos_of_huge_rounded_value_unjudged": Program(
        inputs=[Input((1,), f32, "step", 0.0), Input((1,), f32, "step", 0.05)]
        + [Input((1, 8, 16), f32, "t", 0.05)] * 3,
        steps=[Step("add", (1, 0), {}), Step("attention", (2, 3, 4), {"heads": 4, "causal": True}),
               Step("cos", (6,), {})],
        outputs=[7], seed=1),
    # inf // 0.2: eager's kernel says NaN (fmod(inf, b) is NaN), Zenith inf, as floor(a / b).
    "floor_divide_of_inf_is_inf": Program(
        inputs=[Input((1, 1, 1), f32, "t", 0.05), Input((1, 3, 3, 3), f32, "t", 0.05)],
        steps=[Step("floor_divide", (1, 0), {})], outputs=[2], seed=2),
    # conv (200 terms cancelling to ~1) then log: Zenith and eager differ by summation
    # order alone; the judge allows what 8-ulp nudges of the terms move eager by.
    "conv_then_log_summation_order": Program(
        inputs=[Input((2, 8, 9, 11), f32, "contig", 0.0), Input((16, 8, 5, 5), f32, "contig", 0.0)]
        + [Input((16,), f32, "contig", 0.0)] * 4 + [Input((16,), f32, "contig", 0.0, 0.1, 2.0, True),
                                                   Input((2, 16, 3, 4), f32, "contig", 0.0)],
        steps=[Step("conv", (0, 1, 2, 3, 4, 5, 6, 7), {"stride": 2, "padding": 0, "dilation": 1, "groups": 1,
                                                       "bias": True, "bn": True, "residual": True, "act": None}),
               Step("log", (8,), {}), Step("abs", (9,), {})],
        outputs=[10], seed=31080),
    # 1 / erf(x) for x near 1e-3: erf was 1 - erfc there, 1e-4 relative error (now a series)
    "reciprocal_of_erf_near_zero": Program(
        inputs=[Input((1, 1, 1, 2), f32, "t", 0.05), Input((2,), f32, "step", 0.0)],
        steps=[Step("reshape", (0,), {"shape": (2,)}), Step("rms_norm", (2, 1), {}), Step("erf", (3,), {}),
               Step("reciprocal", (4,), {}), Step("reshape", (5,), {"shape": (-1,)})],
        outputs=[5, 6, 5], seed=0),
    # ceil(-0.3) is -0; erf(-0) must be -0 so that 1 / erf gives -inf (the sign was dropped)
    "erf_of_negative_zero": Program(
        inputs=[Input((1, 1, 1, 1), f32, "t", 0.05)],
        steps=[Step("ceil", (0,), {}), Step("erf", (1,), {}), Step("reciprocal", (2,), {}),
               Step("reshape", (3,), {"shape": (-1,)})],
        outputs=[3, 4, 3], seed=0),
    # layer_norm over two values near 3e30, 1e27 apart: float32's sum of squared
    # deviations overflows, eager says NaN, Zenith +-1 to 2e-4 (x - mean keeps only that
    # many digits in float32), float64 +-1 exactly: the judge failed Zenith for not
    # matching float64 within 1e-4. Such ill-conditioned rows (max|x| 4628x the spread) are
    # now unjudged (counted); well-spread ones stay judged. The first 13
    # inputs and 9 steps only make the failing values (a 1x1 conv of 1e30 inputs).
    "layer_norm_overflowing_variance_unjudged": Program(
        inputs=[Input((1, 1, 0), f32, "t", 0.0), Input((1, 1, 0), f32, "t", 0.05),
                Input((5, 3, 16, 7), i64, "t", 0.0), Input((1, 4, 15, 3), f32, "cl", 0.5),
                Input((4, 1, 1, 1), f32, "t", 0.0)]
        + [Input((4,), f32, "step", 0.0)] * 4
        + [Input((4,), f32, "step", 0.0, 0.1, 2.0, True), Input((4,), b8, "step", 0.0),
           Input((8, 4, 1, 1), f32, "t", 0.0), Input((8,), f32, "step", 0.0)],
        steps=[Step("conv", (3, 4, 5, 6, 7, 8, 9), {"stride": 1, "padding": 0, "dilation": 1, "groups": 4,
                                                    "bias": True, "bn": True, "residual": False, "act": None}),
               Step("conv", (3, 11, 12), {"stride": 2, "padding": 0, "dilation": 1, "groups": 1, "bias": True,
                                          "bn": False, "residual": False, "act": None}),
               Step("conv", (3, 11, 12), {"stride": 2, "padding": 0, "dilation": 1, "groups": 1, "bias": True,
                                          "bn": False, "residual": False, "act": None}),
               Step("cos", (15,), {}), Step("cos", (16,), {}),
               Step("scalar_op", (15,), {"kind": "add", "c": 0.5}), Step("scalar_op", (15,), {"kind": "add", "c": 0.5}),
               Step("cos", (19,), {}), Step("reshape", (20,), {"shape": (128,)}),
               Step("layer_norm", (19,), {"eps": 1e-05}), Step("reshape", (21,), {"shape": (-1,)})],
        outputs=[22, 23, 21], seed=1218),
    # a 64x64x5x5 convolution plus a residual (1600 terms cancelling to ~0.1): one nudged
    # run's signs cancelled at one element (it moved 9e-7, the median 1e-4), so the judge
    # failed summation-order noise; the allowance is now the largest of three nudged runs.
    # The first 28 inputs only advance the input generator to the failing draw.
    "conv_residual_spread_of_three_nudges": Program(
        inputs=[Input((4,), f16, "step", 0.0), Input((1, 3, 23), f32, "t", 0.05), Input((5, 19), i64, "step", 0.0),
                Input((1, 33), f32, "t", 0.05), Input((33,), f32, "contig", 0.0), Input((33,), f32, "contig", 0.0),
                Input((1, 33), f32, "t", 0.05), Input((33,), f32, "contig", 0.0),
                Input((1, 1, 3, 13), f32, "contig", 0.05), Input((1, 1, 1, 1), f32, "t", 0.0)]
        + [Input((1,), f32, "contig", 0.0)] * 3
        + [Input((1,), f32, "step", 0.0), Input((1,), f32, "contig", 0.0, 0.1, 2.0, True),
           Input((1, 1, 3, 13), f32, "t", 0.05), Input((1, 8, 9, 12), f32, "t", 0.05),
           Input((4, 4, 3, 3), f32, "t", 0.0)]
        + [Input((4,), f32, "contig", 0.0)] * 4
        + [Input((4,), f32, "contig", 0.0, 0.1, 2.0, True), Input((1, 4, 9, 12), f32, "step", 0.05),
           Input((2, 17, 8), f32, "contig", 0.0), Input((2, 17, 8), f32, "t", 0.0),
           Input((2, 17, 8), f32, "contig", 0.0), Input((8,), f32, "contig", 0.0),
           Input((1, 64, 10, 13), f32, "t", 0.0), Input((64, 64, 5, 5), f32, "t", 0.0),
           Input((64,), f32, "step", 0.0), Input((1, 64, 10, 13), f32, "t", 0.05)],
        steps=[Step("conv", (28, 29, 30, 31), {"stride": 1, "padding": 2, "dilation": 1, "groups": 1, "bias": True,
                                               "bn": False, "residual": True, "act": None})],
        outputs=[32], seed=182401562),
    # A bfloat16 linear whose row holds 1e30 and -1e30 against equal weights: the terms cancel
    # exactly, and which small terms survive in float32 is the summation order's choice
    # (eager kept them, Zenith's lanes lost some: 3.17 against 0.738). Nudges cannot move
    # bfloat16 inputs, so the arbiter judged it; such outputs are now unjudged
    # (_cancels_past_float32). The first 23 inputs only advance the input generator.
    "linear_bf16_terms_cancelling_past_float32": Program(
        inputs=[Input((17, 5, 3, 4), f32, "cl", 0.05), Input((), f32, "contig", 0.0), Input((1, 7), f32, "t", 0.0),
                Input((1, 16), f32, "contig", 0.0), Input((16,), f32, "contig", 0.0),
                Input((16,), f32, "contig", 0.0), Input((1, 16), f32, "t", 0.0),
                Input((2, 17, 16), f32, "contig", 0.05), Input((2, 1, 16), f32, "contig", 0.05),
                Input((2, 1, 16), f32, "step", 0.0), Input((2, 1, 1, 1), f32, "cl", 0.05),
                Input((2, 1, 16), f32, "step", 0.05), Input((2, 1, 16), f32, "step", 0.05),
                Input((2, 1, 16), f32, "t", 0.05), Input((2, 17, 32), f32, "contig", 0.0),
                Input((2, 17, 32), f32, "t", 0.0), Input((2, 17, 32), f32, "t", 0.05),
                Input((33, 31), f32, "t", 0.05), Input((4, 31), f32, "contig", 0.0), Input((4,), f32, "step", 0.0),
                Input((5,), i64, "step", 0.0, 0, 33), Input((31,), f32, "contig", 0.0),
                Input((31,), f32, "contig", 0.0), Input((33, 16), bf16, "step", 0.2),
                Input((1, 16), bf16, "contig", 0.0), Input((1,), bf16, "step", 0.0)],
        steps=[Step("linear", (23, 24, 25), {"act": "relu"})], outputs=[26], seed=4928),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_fuzz_regression(name):
    run_case(REGRESSIONS[name])
