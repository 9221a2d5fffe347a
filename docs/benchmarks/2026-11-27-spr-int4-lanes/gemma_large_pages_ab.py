# Gemma 3 270M from its GGUF: the file's blocks as mapped (4 KiB file pages) against a
# copy of every block weight of 2 MiB or more in weight memory (2 MiB pages), interleaved.
import time, statistics, torch, zenith
from zenith import _C
from zenith.bench.decode import gemma3_gguf_path
from zenith.quant import QLinear, QEmbedding
torch.set_num_threads(2)
path = gemma3_gguf_path()
a, tok = zenith.load_gguf(path); a.eval()
b, _ = zenith.load_gguf(path); b.eval()
moved = {}
for mod in b.modules():
    if isinstance(mod, (QLinear, QEmbedding)) and mod.weight.numel() >= (2 << 20):
        w = mod.weight
        if id(w) not in moved:
            out = _C.weight_buffer(w.numel()).view(w.shape); out.copy_(w); moved[id(w)] = out
        mod.weight = moved[id(w)]
print("moved", len(moved), "tensors,", sum(t.numel() for t in moved.values()) / 2**20, "MiB;",
      [l.strip() for l in open("/proc/self/smaps_rollup") if "AnonHuge" in l])
for m in (a, b): m.forward = torch.compile(m.forward, backend="zenith")
ids = tok("The GNU General Public License is a free, copyleft license for", return_tensors="pt").input_ids
kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None, max_new_tokens=100)
res = {"file pages": [], "2 MiB pages": []}
with torch.no_grad():
    ra = a.generate(ids, **kw); rb = b.generate(ids, **kw)
    assert torch.equal(ra, rb)
    for rep in range(8):
        order = (("file pages", a), ("2 MiB pages", b))
        for name, m in order if rep % 2 == 0 else order[::-1]:
            t0 = time.perf_counter(); m.generate(ids, **kw); res[name].append(time.perf_counter() - t0)
for k, v in res.items(): print(k, f"median {statistics.median(v)*1e3:.1f} ms -> {100/statistics.median(v):.1f} tok/s", [round(x*1e3) for x in v])
