# Dynamo's guard check on a compiled MobileNet V2 (b1): timed warm in a loop, right after a call (caches
# cold from the call) and after streaming 32 MB. TAGS=1 sets use_recursive_dict_tags_for_guards first.
import os, time, statistics, torch, torchvision, zenith
torch.set_num_threads(2)
if os.environ.get("TAGS"): torch._dynamo.config.use_recursive_dict_tags_for_guards = True
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(5): c(x)
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    e = _debug_get_cache_entry_list(m.forward.__code__)
    print(len(e), "entries")
    gm = e[0].guard_manager
    loc = {"self": m, "x": x}
    ts = []
    for _ in range(2000):
        t = time.perf_counter(); ok = gm.check(loc); ts.append(time.perf_counter() - t)
    print("guard check", ok, round(statistics.median(ts) * 1e6, 1), "us")
    ts = []
    for _ in range(2000):
        t = time.perf_counter(); c(x); ts.append(time.perf_counter() - t)
    print("call", round(statistics.median(ts) * 1e6, 1))
    ts = []
    for _ in range(500):
        c(x)
        t = time.perf_counter(); ok = gm.check(loc); ts.append(time.perf_counter() - t)
    print("guard check after a call", round(statistics.median(ts) * 1e6, 1), "us")
    big = torch.randn(8 << 20)
    ts = []
    for _ in range(300):
        big.add_(1.0)
        t = time.perf_counter(); ok = gm.check(loc); ts.append(time.perf_counter() - t)
    print("guard check after streaming 32 MB", round(statistics.median(ts) * 1e6, 1), "us")
