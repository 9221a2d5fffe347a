# TinyLlama (config, random init) decode through zenith.compile, generate runs alternated under VAR=0 and VAR=1
# (read per call): per token, the forward (Dynamo, guards and Zenith's call) and Zenith's generated call inside it.
# python dec_ab.py VAR SCHEME [rounds]
import os, random, statistics, sys, time, torch, transformers, zenith
from zenith import partition
var, scheme = sys.argv[1], sys.argv[2]; rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
torch.manual_seed(0); torch.set_num_threads(2)
c = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
m = transformers.LlamaForCausalLM(c).eval()
if scheme != "fp32":
    zenith.quantize(m, scheme, include_embeddings=True)
inner, outer = [], []
orig = partition.CompiledGraph.__call__
def timed(self, args):
    t = time.perf_counter(); r = self._call(args); inner.append(time.perf_counter() - t); return r
partition.CompiledGraph.__call__ = timed
cf = zenith.compile(m.forward)
def wrapped(*a, **k):
    t = time.perf_counter(); r = cf(*a, **k); outer.append(time.perf_counter() - t); return r
m.forward = wrapped
ids = torch.randint(0, 32000, (1, 16))
res = {v: {"tok": [], "fwd": [], "inner": []} for v in "01"}
with torch.no_grad():
    m.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
    for _ in range(rounds):
        for v in random.sample("01", 2):
            os.environ[var] = v
            inner.clear(); outer.clear()
            t = time.perf_counter()
            m.generate(ids, max_new_tokens=32, do_sample=False, pad_token_id=0, eos_token_id=None)
            tot = time.perf_counter() - t
            res[v]["tok"].append((tot - outer[0]) / (len(outer) - 1))
            res[v]["fwd"].append(statistics.median(outer[1:]))
            res[v]["inner"].append(statistics.median(inner[1:]))
for v in "01":
    r = res[v]
    print(f"{var}={v} {scheme}: per token {statistics.median(r['tok'])*1e3:.2f} ms, forward {statistics.median(r['fwd'])*1e3:.2f}, "
          f"Zenith's call {statistics.median(r['inner'])*1e3:.2f}, forward outside it {statistics.median([a-b for a,b in zip(r['fwd'], r['inner'])])*1e3:.2f}")
q = sorted(a / b for a, b in zip(res["1"]["tok"], res["0"]["tok"]))
print(f"per token, {var}=1 / 0 per round: median {statistics.median(q):.3f} [{q[0]:.3f}, {q[-1]:.3f}] over {len(q)} rounds")
