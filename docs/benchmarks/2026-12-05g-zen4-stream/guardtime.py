# time the guard check of the TinyLlama int4 decode frame directly
import time, torch, transformers, zenith, inspect
from zenith.bench.decode import tinyllama_config
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
torch.manual_seed(0); torch.set_num_threads(2)
base = transformers.LlamaForCausalLM(tinyllama_config()).eval()
ids = torch.randint(0, 32000, (1, 16))
m = zenith.quantize(base, "int4")
orig = m.forward
cf = torch.compile(orig, backend="zenith")
captured = {}
def fwd(*a, **k):
    captured["a"], captured["k"] = a, dict(k)
    return cf(*a, **k)
m.forward = fwd
with torch.no_grad():
    m.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
code = orig.__func__.__code__ if hasattr(orig, '__func__') else orig.__code__
entries = _debug_get_cache_entry_list(code)
print("entries", len(entries))
# frame locals of the last decode call
sig = inspect.signature(type(m).forward)
ba = sig.bind(m, *captured["a"], **captured["k"]); ba.apply_defaults()
fn = orig.__func__
cells = dict(zip(fn.__code__.co_freevars, [c.cell_contents for c in fn.__closure__ or ()]))
f_locals = {'self': m, 'args': captured['a'], 'kwargs': captured['k'], **cells}
print(list(cells))
if "kwargs" in f_locals and isinstance(f_locals["kwargs"], dict): pass
torch.set_grad_enabled(False)
for e in entries:
    gm = e.guard_manager
    ok = gm.check(f_locals)
    t = time.perf_counter()
    for _ in range(200): gm.check(f_locals)
    print("check", ok, f"{(time.perf_counter() - t) / 200 * 1e6:.0f} us")
[print(e.guard_manager.check_verbose(f_locals).verbose_code_parts[:2]) for e in entries]
print(list(f_locals))
