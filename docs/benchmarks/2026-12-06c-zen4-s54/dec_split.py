# Per decode token of TinyLlama (config, random init, int4 or fp32): total forward time vs Zenith's
# generated call (the inside of AOTAutograd's wrapper).
import sys, time, statistics, torch, transformers, zenith
from zenith import partition
from zenith.quant import quantize
torch.manual_seed(0); torch.set_num_threads(2)
scheme = sys.argv[1] if len(sys.argv) > 1 else "int4"
c = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
m = transformers.LlamaForCausalLM(c).eval()
if scheme != "fp32":
    zenith.quantize(m, scheme, include_embeddings=True)
inner = []
orig = partition.CompiledGraph.__call__
def timed(self, args):
    t = time.perf_counter(); r = self._call(args); inner.append(time.perf_counter() - t); return r
partition.CompiledGraph.__call__ = timed
fwd = m.forward
outer = []
cf = zenith.compile(fwd)
def wrapped(*a, **k):
    t = time.perf_counter(); r = cf(*a, **k); outer.append(time.perf_counter() - t); return r
m.forward = wrapped
ids = torch.randint(0, 32000, (1, 16))
with torch.no_grad():
    m.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
    for rep in range(3):
        inner.clear(); outer.clear()
        t = time.perf_counter()
        m.generate(ids, max_new_tokens=32, do_sample=False, pad_token_id=0, eos_token_id=None)
        tot = time.perf_counter() - t
        o, i = outer[1:], inner[1:]
        print(f"{scheme}: generate {tot*1e3:.0f} ms; per token forward {statistics.median(o)*1e3:.2f} ms, "
              f"inner {statistics.median(i)*1e3:.2f}, outside inner {statistics.median([a-b for a,b in zip(o,i)])*1e3:.2f} ms, "
              f"per token outside forward {(tot - sum(outer))/len(outer)*1e3:.2f} ms")
import cProfile, pstats
pr = cProfile.Profile()
with torch.no_grad():
    pr.enable()
    m.generate(ids, max_new_tokens=32, do_sample=False, pad_token_id=0, eos_token_id=None)
    pr.disable()
st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(25)
