"""Which of this session's training lowerings moves a model's step: Zenith with all of
them, and with one group at a time taken out (in PyTorch again), in one process, rounds
alternating. Usage: train_parts_ab.py MODEL ROUNDS (MODEL as train_ab.py's)."""
import copy
import statistics as st
import sys

import torch

import train_ab
from zenith import importer

aten = torch.ops.aten
GROUPS = {
    "layer norm": [aten.native_layer_norm_backward.default],  # and the forward's statistics (below)
    "gelu/tanh backward": [aten.gelu_backward.default, aten.tanh_backward.default],
    "embedding grad": [aten.embedding_dense_backward.default, aten._unsafe_masked_index_put_accumulate.default],
    "softmax backward": [aten._softmax_backward_data.default, aten._safe_softmax.default],
    "batch norm": [aten.native_batch_norm_backward.default, aten._native_batch_norm_legit_functional.default],
}


def without(group):
    saved = (list(importer.DECOMPOSE), dict(importer.CONVERTERS))
    for op in GROUPS[group]:
        importer.DECOMPOSE.remove(op)
    if group == "layer norm":
        ln = importer.CONVERTERS[aten.native_layer_norm.default]

        def first_output_only(L, node):
            importer.only_first_output_used(node, "native_layer_norm")
            return ln(L, node)
        importer.CONVERTERS[aten.native_layer_norm.default] = first_output_only
    return saved


def main():
    name, rounds = sys.argv[1], int(sys.argv[2])
    cnn = name not in ("bert", "gpt2", "llama")
    torch.manual_seed(0)
    m, x, loss_of = train_ab.model_and_inputs(name, 8 if cnn else 4, 112 if cnn else 128)
    m.train()

    step = train_ab.stepper(x, loss_of)

    runs = {}
    for label in ["all"] + [f"without {g}" for g in GROUPS]:
        saved = without(label[8:]) if label != "all" else None
        c = copy.deepcopy(m)
        runs[label] = (c, train_ab.compiled(c))
        step(runs[label])
        if saved:
            train_ab.restore(saved)
    t = train_ab.interleave(runs, step, rounds)
    print(f"{name}, {rounds} rounds: each variant / all, per round, median [p25, p75]")
    for k, v in t.items():
        print(f"  {k:28s} {st.median(v) * 1e3:8.1f} ms  {train_ab.ratio(v, t['all'])}")

if __name__ == "__main__":
    main()
