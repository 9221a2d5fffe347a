import time, mmap, torch, zenith
from zenith.quant.ops import qlinear
from zenith.quant.formats import quantize_weight
torch.set_num_threads(2)
ws = [quantize_weight(torch.randn(5632, 2048), "q4_0") for _ in range(40)]
def huge(w):
    n = w.numel(); size = (n + 4095) // 4096 * 4096 + (2 << 20)
    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS); t = torch.frombuffer(mm, dtype=torch.uint8)
    off = (-t.data_ptr()) % (2 << 20); mm.madvise(mmap.MADV_HUGEPAGE)
    out = t[off:off + n].view(w.shape); out.copy_(w); return out, mm
hs = [huge(w) for w in ws]
print([l.strip() for l in open("/proc/self/smaps_rollup") if "AnonHuge" in l])
x = torch.randn(1, 2048)
for rep in range(3):
    for name, lst in (("small", ws), ("huge", [h for h, _ in hs])):
        t0 = time.perf_counter()
        for w in lst: qlinear(x, w, None, "q4_0")
        print(name, f"{(time.perf_counter()-t0)/len(lst)*1e6:.1f} us")
