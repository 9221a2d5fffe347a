# One process's Gemma 3 270M (Q4_K_M GGUF, the file's own blocks) greedy decode time per token, 100 tokens after the
# bench's prompt, median of N generates: for comparing two builds of _C in alternating processes
# (PROBE=decode_probe.py ab_builds.sh OLD.so NEW.so pairs N).
import sys, time, statistics, torch, zenith
from zenith.bench.decode import gemma3_gguf_path, load_gemma3, GEMMA_PROMPT
torch.set_num_threads(2)
n_runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
_, tok, _, _ = load_gemma3()
ids = tok(GEMMA_PROMPT, return_tensors="pt").input_ids
kw = dict(max_new_tokens=100, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.load_gguf(gemma3_gguf_path())[0].eval()
m.forward = torch.compile(m.forward, backend="zenith")
ts = []
with torch.no_grad():
    m.generate(ids, **kw); m.generate(ids, **kw)
    for _ in range(n_runs):
        t = time.perf_counter(); m.generate(ids, **kw); ts.append(time.perf_counter() - t)
print(f"decode {100 / statistics.median(ts):.1f} tok/s (median of {n_runs} generates of 100 tokens)")
