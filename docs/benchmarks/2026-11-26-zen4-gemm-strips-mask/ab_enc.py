# In-process A/B of one ab_switches.diff switch on an encoder (ab_common.interleave: the same compiled
# model, rounds interleaved, VAR unset = new, set = old), attention mask of ones as the bench passes.
#   git apply <this dir>/ab_switches.diff && make .venv/.zenith-installed
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_enc.py {minilm,bert} SEQ ROUNDS ZM
import os, sys, torch, zenith
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "2026-11-26-zen4-stems-dwgroups"))
from ab_common import interleave, line
torch.set_num_threads(2); torch.manual_seed(0)
name, S, R, var = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if name == "minilm":
    from zenith.demo import load_minilm
    tok, m = load_minilm()
else:
    from transformers import BertConfig, BertModel
    m = BertModel(BertConfig()).eval()
ids = torch.randint(1000, 20000, (1, S)); am = torch.ones_like(ids)
with torch.no_grad():
    ref = m(ids, am).last_hidden_state
g = zenith.compile(m)
f = lambda x: g(x, am).last_hidden_state
print(line(f"{name} s{S} ({var}=1 is old)", interleave(f, ids, ref, var, R, skip=3)))
