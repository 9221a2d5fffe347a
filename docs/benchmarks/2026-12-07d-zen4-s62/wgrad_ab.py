"""Training step of a torchvision CNN in one process: eager; Zenith with the filters'
gradients as before this session (B from the phased input, ZENITH_WGRAD_CL=0; maps of
512+ pixels image by image with threads splitting each GEMM, ZENITH_WGRAD_SPLIT=0); and
Zenith as now (B from the channels-last input where a group has 16+ channels; images
split across threads). Both variables are read per call, so each arm sets them around
its own step. Rounds alternate the three. Usage: wgrad_ab.py MODEL ROUNDS [BATCH SIZE].
Prints median ms and per-round ratios, median [p25, p75]."""
import copy
import os
import statistics as st
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-12-07a-zen4-s59"))
import train_ab  # noqa: E402

ARMS = {"before": {"ZENITH_WGRAD_CL": "0", "ZENITH_WGRAD_SPLIT": "0"},
        "after": {"ZENITH_WGRAD_CL": "1", "ZENITH_WGRAD_SPLIT": "1"}}


def main():
    name, rounds = sys.argv[1], int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 112
    torch.manual_seed(0)
    m, x, loss_of = train_ab.model_and_inputs(name, batch, size)
    m.train()
    plain = train_ab.stepper(x, loss_of)

    def step(run):
        for k, v in run[2].items():
            os.environ[k] = v
        return plain(run[:2])

    want = plain((m, m))
    runs = {"eager": (m, m, {})}
    for label, env in ARMS.items():
        c = copy.deepcopy(m)
        runs[label] = (c, train_ab.compiled(c), env)
        got = step(runs[label])
        assert abs(got - want) <= 1e-4 * abs(want) + 1e-6, (label, got, want)
    grads = {}
    for label in ARMS:
        step(runs[label])
        grads[label] = [p.grad.clone() for p in runs[label][0].parameters()]
    worst = max(((a - b).abs().max() / (b.abs().max() + 1e-12)).item() for a, b in zip(grads["after"], grads["before"]))
    t = train_ab.interleave(runs, step, rounds)
    print(f"{name} batch {batch} {size} px, {torch.get_num_threads()} threads, {rounds} rounds; "
          f"largest gradient difference after / before, relative to the tensor's max: {worst:.2e}")
    for k, v in t.items():
        print(f"  {k:8s} {st.median(v) * 1e3:8.1f} ms   / eager {train_ab.ratio(v, t['eager'])}")
    print(f"  after / before per round {train_ab.ratio(t['after'], t['before'])}")


if __name__ == "__main__":
    main()
