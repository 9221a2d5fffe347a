# Where a torch.compile(backend="zenith") call of MobileNet V2 b1 spends its time: before Zenith's
# generated call (Dynamo: wrappers, guards, the frame), inside it, after it. Medians of 500 calls.
import random, time, statistics, torch, torchvision, zenith
import zenith.backend as B
torch.set_num_threads(2)
stamps = {}
orig = B._direct_inference
def wrapped(*a, **k):
    fn = orig(*a, **k)
    def run(*args):
        stamps["in"] = time.perf_counter(); r = fn(*args); stamps["out"] = time.perf_counter(); return r
    return run
B._direct_inference = wrapped
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
import os
if os.environ.get("TAGS"): torch._dynamo.config.use_recursive_dict_tags_for_guards = True
c = torch.compile(m, backend="zenith")
pre, inner, post = [], [], []
with torch.no_grad():
    for _ in range(10): c(x)
    for _ in range(500):
        t0 = time.perf_counter(); c(x); t1 = time.perf_counter()
        pre.append(stamps["in"] - t0); inner.append(stamps["out"] - stamps["in"]); post.append(t1 - stamps["out"])
med = lambda v: round(statistics.median(v) * 1e6, 1)
print("pre us", med(pre), "inner us", med(inner), "post us", med(post))
