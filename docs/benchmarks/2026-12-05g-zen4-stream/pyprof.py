# TinyLlama-1.1B config int4, compiled: cProfile over one 32-token generate after a warm one;
# where the Python time around Zenith's graph call goes. python pyprof.py [scheme]
import cProfile, pstats, sys, torch, transformers, zenith
from zenith.bench.decode import tinyllama_config
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16)); n = 32
kw = dict(max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
m = zenith.quantize(base, sys.argv[1] if len(sys.argv) > 1 else "int4")
m.forward = torch.compile(m.forward, backend="zenith")
with torch.no_grad():
    m.generate(ids, **kw); m.generate(ids, **kw)
    pr = cProfile.Profile(); pr.enable(); m.generate(ids, **kw); pr.disable()
st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(30)
st.sort_stats("cumulative").print_stats(45)
