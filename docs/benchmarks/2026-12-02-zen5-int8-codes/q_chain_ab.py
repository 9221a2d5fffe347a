# Paired A/B (zenith.freeze): fp32 against int8-static with float32 between the int8 convs
# (ZENITH_INT8_CHAIN=0), with codes between them but residuals float (=exact), and with
# residuals as codes too (chain_int8's default; before 2026-12-02's residual codes, the
# default was what =exact now is, and this script had no int8-exact row); with
# --all-int8, two more: every conv int8 (int8_everywhere=True), floats and codes between them.
# python q_chain_ab.py <batch> [rounds] [torchvision model, default resnet50] [--all-int8]
# Each round runs every variant once, in rotating order (zenith.bench.stats.paired_rounds; the
# figures in results.txt came from the same loop written inline); medians of per-round ratios.
import os, sys, copy, statistics, torch, torchvision, zenith
from zenith.bench.stats import paired_rounds
torch.manual_seed(0); torch.set_num_threads(2)
args = [a for a in sys.argv[1:] if not a.startswith("--")]
B = int(args[0]); rounds = int(args[1]) if len(args) > 1 else 20
arch = args[2] if len(args) > 2 else "resnet50"
m = getattr(torchvision.models, arch)().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
variants = [("fp32", m, None), ("int8-floats", q, "0"), ("int8-exact", q, "exact"), ("int8-codes", q, None)]
if "--all-int8" in sys.argv:
    a = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal, int8_everywhere=True)
    print("all-int8 kept fp32:", sorted(zenith.quant.summary(a).kept))
    variants += [("all-int8-floats", a, "0"), ("all-int8-codes", a, None)]
print("int8 kept fp32:", sorted(zenith.quant.summary(q).kept))
models = {}
with torch.no_grad():
    ref = m(x)
    for name, mod, env in variants:
        os.environ.pop("ZENITH_INT8_CHAIN", None)
        if env: os.environ["ZENITH_INT8_CHAIN"] = env
        models[name] = zenith.freeze(mod)  # (torch.compile would reuse one Dynamo graph for both int8 models)
        out = models[name](x)  # compiled here, under this ZENITH_INT8_CHAIN
        print(f"{name}: max |out - eager fp32| {float((out - ref).abs().max()):.4f}, top-1 agree "
              f"{float((out.argmax(1) == ref.argmax(1)).float().mean()):.3f}")
    os.environ.pop("ZENITH_INT8_CHAIN", None)
    fa = models["int8-floats"](x); fe = models["int8-exact"](x); fb = models["int8-codes"](x)
    print(f"int8 floats vs exact: max diff {float((fa - fe).abs().max()):.3g}; floats vs codes: max diff "
          f"{float((fa - fb).abs().max()):.3g}, top-1 agree {float((fa.argmax(1) == fb.argmax(1)).float().mean()):.3f}")
    ts = paired_rounds(models, rounds, x)
for k, t in ts.items():
    ra = sorted(b / a for a, b in zip(ts["fp32"], t))
    print(f"{arch} b{B} {k:<16} median {statistics.median(t)*1e3:8.2f} ms  / fp32 {statistics.median(ra):.3f} "
          f"[p25 {ra[len(ra)//4]:.3f}, p75 {ra[3*len(ra)//4]:.3f}]")
