import torch, torchvision, zenith, time, statistics
torch.manual_seed(0); torch.set_num_threads(2)
m = torchvision.models.mobilenet_v2().eval(); x = torch.randn(1, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(5): f(x)
    with zenith.profiler.profile() as p:
        ts = []
        for _ in range(200):
            t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
    print("wall median", statistics.median(ts) * 1e3, "kernels/call", sum(e for e in [0]) )
    print(str(p).splitlines()[-1])
    ts = []
    for _ in range(200):
        t = time.perf_counter(); f(x); ts.append(time.perf_counter() - t)
    print("wall median no prof", statistics.median(ts) * 1e3)
    import cProfile, pstats
    pr = cProfile.Profile(); pr.enable()
    for _ in range(200): f(x)
    pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(8)
