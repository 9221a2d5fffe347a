import resource, time, torch, torchvision, zenith, sys
torch.set_num_threads(2); torch.manual_seed(0)
B = int(sys.argv[1])
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
f = zenith.freeze(m)
with torch.no_grad():
    for _ in range(3): f(x)
    r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter()
    for _ in range(10): y = f(x)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
print("per call: minor faults", (r1.ru_minflt - r0.ru_minflt) / 10, "ms", (time.perf_counter() - t) * 100, "sys s", (r1.ru_stime - r0.ru_stime) / 10)
