# In-process A/B of sgemm's column grouping and vector epilogue: the same compiled model,
# called in interleaved rounds under each variant's environment (NAME=VAL;NAME=VAL, or "-"
# for none). Needs a build with ab_switches.diff applied (ZE=1: the scalar epilogue loop;
# ZG=bytes: the group size, 0 = one panel at a time), which reads them per sgemm call:
#   git apply ab_switches.diff && make .venv/.zenith-installed
#   [ZENITH_NO_AVX512=1] .venv/bin/python ab_switches.py resnet50 8 6 "ZE=1;ZG=0,ZE=1,-"
# (models: torchvision names, or bert / minilm with the sequence length as N.)
import os, sys, time, statistics, torch, torchvision, zenith
torch.set_num_threads(2)
name, N, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
variants = sys.argv[4].split(",")
torch.manual_seed(0)
if name in ("bert", "minilm"):
    from transformers import BertConfig, BertModel
    cfg = BertConfig() if name == "bert" else BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
    m = BertModel(cfg).eval(); x = torch.randint(0, 30000, (1, N))
else:
    m = getattr(torchvision.models, name)().eval(); x = torch.randn(N, 3, 224, 224)
f = zenith.compile(m)
def setv(v):
    for k in ("ZE", "ZG", "ZP"): os.environ.pop(k, None)
    if v != "-":
        for kv in v.split(";"):
            k, val = kv.split("="); os.environ[k] = val
with torch.no_grad():
    ref = m(x); ref = ref[0] if not torch.is_tensor(ref) else ref
    for _ in range(3): f(x)
    t = {v: [] for v in variants}; outs = {}
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            setv(v)
            s = time.perf_counter(); y = f(x); t[v].append(time.perf_counter() - s)
            outs[v] = y[0] if not torch.is_tensor(y) else y
for v in variants:
    ratios = sorted(a / b for a, b in zip(t[v], t[variants[0]]))
    print(f"{name} {N} {'AVX2' if os.environ.get('ZENITH_NO_AVX512') else 'default'} [{v:>16}]: median {1e3*statistics.median(t[v]):8.2f} ms  new/old per round: median {statistics.median(ratios):.3f} p25 {ratios[len(ratios)//4]:.3f} p75 {ratios[3*len(ratios)//4]:.3f}  maxerr {(outs[v]-ref).abs().max().item():.1e}", flush=True)
