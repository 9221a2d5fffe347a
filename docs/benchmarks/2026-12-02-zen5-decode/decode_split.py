# Gemma 3 270M from its Q4_K_M GGUF, 100-token greedy decode: where a token's time goes.
# Per token: the whole generate step, the compiled forward (Dynamo's guards and wrappers,
# then Zenith's call), and Zenith's graph call alone; then again with Dynamo's guard
# evaluation skipped (torch.compiler.set_stance skip_guard_eval_unsafe) to see what the
# guards cost. With setup_timer.diff applied, ZENITH_EXP_PLAN_T=1 also prints the
# runtime's per-call setup (plan lookup or build, refs, packed weights) before the node loop.
# python decode_split.py
import time, sys, torch, zenith, os, statistics
from zenith.bench.decode import gemma3_gguf_path, load_gemma3, GEMMA_PROMPT
import zenith.partition as P
torch.set_num_threads(2)
_, tok, _, _ = load_gemma3()
m = zenith.load_gguf(gemma3_gguf_path())[0].eval()
fwd = torch.compile(m.forward, backend="zenith")
T = {"fwd": [], "zen": [], "gen": []}
def tf(*a, **k):
    t = time.perf_counter(); r = fwd(*a, **k); T["fwd"].append(time.perf_counter() - t); return r
m.forward = tf
cls = [c for c in vars(P).values() if isinstance(c, type) and "__call__" in vars(c) and "_call" in str(vars(c)["__call__"].__code__.co_names)][0]
def zc(self, args):
    t = time.perf_counter(); r = self._call(args); T["zen"].append(time.perf_counter() - t); return r
cls.__call__ = zc
ids = tok(GEMMA_PROMPT, return_tensors="pt").input_ids
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
with torch.no_grad():
    m.generate(ids, max_new_tokens=100, **kw)
    for k in T: T[k].clear()
    for _ in range(5):
        t = time.perf_counter(); m.generate(ids, max_new_tokens=100, **kw); T["gen"].append(time.perf_counter() - t)
print("per token: generate %.3f ms, forward %.3f, zenith call %.3f" % (statistics.median(T["gen"])/100*1e3, statistics.median(T["fwd"])*1e3, statistics.median(T["zen"])*1e3))
with torch.no_grad(), torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
    for k in T: T[k].clear()
    for _ in range(5):
        t = time.perf_counter(); m.generate(ids, max_new_tokens=100, **kw); T["gen"].append(time.perf_counter() - t)
print("skip guards: per token: generate %.3f ms, forward %.3f, zenith call %.3f" % (statistics.median(T["gen"])/100*1e3, statistics.median(T["fwd"])*1e3, statistics.median(T["zen"])*1e3))
