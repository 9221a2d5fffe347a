# Paired A/B on ResNet-50: fp32 against int8-static compiled NCHW (ZENITH_NCHWC=0, where
# every int8 conv ran before the blocked int8 conv) and blocked (the default); zenith.freeze.
# (At b45ceab a fourth, "int8-b-all56", monkeypatched quantize's rule that then kept 1x1
# convs over 56 x 56 maps fp32 on full-width AVX-512; aec58d2 dropped the rule.)
# python q_layout_ab.py <batch> [rounds] [torchvision model, default resnet50]; each round runs the three once, in rotating order.
import os, sys, copy, time, statistics, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
arch = sys.argv[3] if len(sys.argv) > 3 else "resnet50"
m = getattr(torchvision.models, arch)().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
models = {}
with torch.no_grad():
    ref = m(x)
    for name, mod, env in (("fp32", m, None), ("int8-nchw", q, "0"), ("int8-blocked", q, None)):
        os.environ.pop("ZENITH_NCHWC", None)
        if env: os.environ["ZENITH_NCHWC"] = env
        models[name] = zenith.freeze(mod)  # (torch.compile would reuse one Dynamo graph for both int8 models)
        out = models[name](x)  # compiled here, under this ZENITH_NCHWC
        print(f"{name}: max |out - eager fp32| {float((out - ref).abs().max()):.4f}, top-1 agree "
              f"{float((out.argmax(1) == ref.argmax(1)).float().mean()):.3f}")
    os.environ.pop("ZENITH_NCHWC", None)
    qa = models["int8-nchw"](x); qb = models["int8-blocked"](x)
    print(f"int8 nchw vs blocked: max diff {float((qa - qb).abs().max()):.3g}")
    names = list(models); ts = {k: [] for k in names}
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            t = time.perf_counter(); models[k](x); ts[k].append(time.perf_counter() - t)
for k in names:
    ra = sorted(b / a for a, b in zip(ts["fp32"], ts[k]))
    print(f"{arch} b{B} {k:<13} median {statistics.median(ts[k])*1e3:8.2f} ms  / fp32 {statistics.median(ra):.3f} "
          f"[p25 {ra[len(ra)//4]:.3f}, p75 {ra[3*len(ra)//4]:.3f}]")
