# Shared by pass_ab.py and pass_nodes.py: a random-init BERT-base ("bert") or MiniLM-shaped encoder, and two frozen
# copies of it compiled with a pass's off switch set to 0 (key "0") and to 1, i.e. left on (key "1").
# Switches: ZENITH_GEMM_HANDOFF (gemm_handoff_transposed), ZENITH_ADDMM_SIBLINGS (fuse_addmm_siblings).
import os, torch, zenith, transformers


def two_copies(env, name, seq):
    torch.manual_seed(0); torch.set_num_threads(2)
    cfg = transformers.BertConfig() if name == "bert" else transformers.BertConfig(
        hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
    m = transformers.BertModel(cfg).eval(); ids = torch.randint(0, 1000, (1, seq))
    fs = {}
    with torch.no_grad():
        for k in ("0", "1"):
            os.environ[env] = k; fs[k] = zenith.freeze(m); fs[k](ids)  # compiled at the first call
    return m, ids, fs
