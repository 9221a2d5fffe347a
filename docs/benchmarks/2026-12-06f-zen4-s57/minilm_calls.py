# all-MiniLM-L6-v2 (real weights) frozen, CALLS calls at seq SEQ, 2 threads: for the phase timers (ZENITH_PHASES=1 with
# phase_timers.diff applied) or perf. python minilm_calls.py SEQ CALLS
import sys, torch, zenith
from zenith.demo import load_minilm
torch.manual_seed(0); torch.set_num_threads(2)
s, n = int(sys.argv[1]), int(sys.argv[2])
tok, m = load_minilm()
ids = torch.randint(1000, 20000, (1, s)); mask = torch.ones_like(ids)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(n): f(ids, mask)
