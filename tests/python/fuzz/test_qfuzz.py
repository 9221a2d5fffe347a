"""Differential fuzzing of the INT8 path: random quantized CNNs (qnets.py), frozen by Zenith
against the same quantized model run eagerly, against itself with float32 between its
int8 convs, and at other thread counts.

CI runs ZENITH_QFUZZ_NETS nets (default 40) from a fixed seed; `make fuzz` sets
ZENITH_FUZZ_OPEN=1: a random seed, Hypothesis' example database, and its own budget. A
failure shrinks to a `QNet(...)` literal: paste it into test_fuzz_regressions.py once
fixed. Prints what the nets reached, and for a budget of 40 or more fails if the blocked
layout, codes between convs or the NaN and infinity inputs were never reached.
"""
import os
import random
import sys
import time

import pytest

pytest.importorskip("hypothesis")

import hypothesis  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))  # quant_util

import qnets  # noqa: E402

NETS = int(os.environ.get("ZENITH_QFUZZ_NETS", "40"))
OPEN_ENDED = os.environ.get("ZENITH_FUZZ_OPEN") == "1"
REACHED = ["layout_nchwc", "chain_int8", "with_nan_input", "with_inf_input"]


def test_qfuzz_int8_frozen_matches_eager():
    seed = random.randrange(2**31) if OPEN_ENDED else 1
    phases = [Phase.explicit, Phase.generate, Phase.shrink]
    database = None
    if OPEN_ENDED:
        phases.insert(1, Phase.reuse)
        database = hypothesis.database.DirectoryBasedExampleDatabase(
            os.environ.get("ZENITH_QFUZZ_DB", ".hypothesis/zenith-qfuzz"))

    @hypothesis.seed(seed)
    @settings(max_examples=NETS, deadline=None, database=database, phases=phases,
              suppress_health_check=list(HealthCheck), derandomize=False, print_blob=True)
    @given(st.data())
    def case(data):
        net = qnets.draw_qnet(data)
        try:
            qnets.run_qcase(net)
        except AssertionError as e:
            raise AssertionError(f"{e}\n\nrepro:\n{net!r}") from e

    qnets.QCOUNTS.clear()
    t0 = time.perf_counter()
    case()
    c = qnets.QCOUNTS
    print(f"\nqfuzz: {c['nets']} quantized nets checked in {time.perf_counter() - t0:.0f} s (seed {seed})")
    for k in ["int8_layers", "float_layers_kept", "layout_nchwc", "chain_int8", "fuse_conv_residual", "fuse_conv_bn",
              "with_finite_input", "with_nan_input", "with_inf_input"]:
        print(f"  {k:24s} {c[k]}")
    if NETS >= 40:
        assert all(c[k] > 0 for k in REACHED), {k: c[k] for k in REACHED}
