"""Training step (forward + backward, zero_grad first) in one process: eager, Zenith, and
Zenith with this session's training lowerings taken out ("before": the backward ops and
batch norm's training forms not decomposed, no index_put converter, native_layer_norm's
statistics refused), rounds alternating the three. Dropout off (its masks are PyTorch's
either way). Usage: train_ab.py MODEL ROUNDS [BATCH SIZE]; MODEL in bert, gpt2, llama,
resnet18, mobilenet_v2. Prints median ms and the per-round ratio to eager, median [p25, p75]."""
import copy
import statistics as st
import sys
import time

import torch
import torchvision
import transformers

from zenith import importer

aten = torch.ops.aten
NEW_DECOMPOSE = [
    aten.tanh_backward.default, aten.gelu_backward.default, aten.hardtanh_backward.default,
    aten.sigmoid_backward.default, aten.leaky_relu_backward.default, aten.elu_backward.default,
    aten._softmax_backward_data.default, aten._log_softmax_backward_data.default,
    aten.native_dropout_backward.default, aten.select_backward.default, aten.slice_backward.default,
    aten._safe_softmax.default, aten.native_layer_norm_backward.default, aten.native_batch_norm_backward.default,
    aten._native_batch_norm_legit_functional.default, aten.mse_loss_backward.default,
    aten.embedding_dense_backward.default, aten._unsafe_masked_index_put_accumulate.default,
]


def before_state():
    saved = (list(importer.DECOMPOSE), dict(importer.CONVERTERS))
    for op in NEW_DECOMPOSE:
        importer.DECOMPOSE.remove(op)
    for op in (aten.index_put.default, aten._unsafe_index_put.default):
        importer.CONVERTERS.pop(op)
    ln = importer.CONVERTERS[aten.native_layer_norm.default]

    def first_output_only(L, node):
        importer.only_first_output_used(node, "native_layer_norm")
        return ln(L, node)
    importer.CONVERTERS[aten.native_layer_norm.default] = first_output_only
    return saved


def restore(saved):
    importer.DECOMPOSE[:] = saved[0]
    importer.CONVERTERS.clear()
    importer.CONVERTERS.update(saved[1])


def model_and_inputs(name, batch, size):
    nd = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
              attn_pdrop=0.0)
    if name == "bert":  # BERT-base's shape, 4 layers
        m = transformers.BertForSequenceClassification(transformers.BertConfig(num_hidden_layers=4, **nd))
    elif name == "gpt2":  # GPT-2 small's shape, 4 layers
        m = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=4, **nd))
    elif name == "llama":
        m = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            num_hidden_layers=4, hidden_size=512, num_attention_heads=8, num_key_value_heads=4,
            intermediate_size=1376, vocab_size=32000))
    else:
        m = getattr(torchvision.models, name)(num_classes=1000)
        for mod in m.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        return m, torch.randn(batch, 3, size, size), lambda o: o.pow(2).mean()
    return m, torch.randint(0, m.config.vocab_size, (batch, size)), lambda o: o.logits.float().pow(2).mean()


def compiled(mod):
    """mod compiled through a wrapper with a code object of its own: Dynamo caches graphs
    per code object and, with nn.Modules inlined, a second deep copy of one model would
    reuse the first copy's compiled graph (its parameters are graph inputs)."""
    def f(*a):
        return mod(*a)

    f.__code__ = f.__code__.replace()
    return torch.compile(f, backend="zenith")


def stepper(x, loss_of):
    """One training step of a (module, callable) pair: zero_grad, forward, backward; the loss."""
    def step(run):
        mod, fn = run
        mod.zero_grad(set_to_none=True)
        loss = loss_of(fn(x))
        loss.backward()
        return loss.item()
    return step


def interleave(runs, step, rounds):
    """Two warm-up rounds, then `rounds` rounds each timing every run once, in turn."""
    for _ in range(2):
        for run in runs.values():
            step(run)
    t = {k: [] for k in runs}
    for _ in range(rounds):
        for k, run in runs.items():
            t0 = time.perf_counter()
            step(run)
            t[k].append(time.perf_counter() - t0)
    return t


def ratio(num, den):
    """Per-round num / den as "median [p25, p75]"."""
    r = sorted(b / a for a, b in zip(den, num))
    return f"{st.median(r):.3f} [{r[len(r) // 4]:.3f}, {r[3 * len(r) // 4]:.3f}]"


def main():
    name, rounds = sys.argv[1], int(sys.argv[2])
    cnn = name not in ("bert", "gpt2", "llama")
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else (8 if cnn else 4)
    size = int(sys.argv[4]) if len(sys.argv) > 4 else (112 if cnn else 128)
    torch.manual_seed(0)
    m, x, loss_of = model_and_inputs(name, batch, size)
    m.train()

    step = stepper(x, loss_of)
    ma, mb = copy.deepcopy(m), copy.deepcopy(m)
    after = (ma, compiled(ma))
    want = step((m, m))
    assert abs(step(after) - want) <= 1e-4 * abs(want) + 1e-6
    saved = before_state()
    before = (mb, compiled(mb))
    assert abs(step(before) - want) <= 1e-4 * abs(want) + 1e-6
    restore(saved)
    runs = {"eager": (m, m), "zenith before": before, "zenith after": after}
    t = interleave(runs, step, rounds)
    print(f"{name} batch {batch} {'px' if cnn else 'tokens'} {size}, {torch.get_num_threads()} threads, {rounds} rounds")
    for k, v in t.items():
        print(f"  {k:14s} {st.median(v) * 1e3:8.1f} ms   / eager {ratio(v, t['eager'])}")
    print(f"  after / before per round {ratio(t['zenith after'], t['zenith before'])}")

if __name__ == "__main__":
    main()
