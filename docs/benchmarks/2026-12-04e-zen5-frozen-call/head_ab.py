import os, sys, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1])
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
a = zenith.freeze(m)
with torch.no_grad(): a(x)
os.environ["ZENITH_AB_NOPOOL"] = "1"
b = zenith.freeze(m)
with torch.no_grad(): b(x)
del os.environ["ZENITH_AB_NOPOOL"]
for rep in range(2):
    for k, f in (("A", a), ("B", b)):
        with torch.no_grad():
            with zenith.profile(trace="/dev/null") as p:
                for _ in range(6): f(x)
        per = {}
        for e in p.events: per.setdefault((e[1], e[0]), []).append(e[5])
        print(k, [(kk[1], round(statistics.median(v))) for kk, v in sorted(per.items())[:4]], "total", round(sum(e[5] for e in p.events) / 6))
