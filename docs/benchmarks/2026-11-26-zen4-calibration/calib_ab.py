# zenith.quantize(BERT-base, "int8-static") on 100 calibration samples (seq 128): wall time,
# and the scales / per-layer errors with calibration's linear layers on Zenith's SGEMM (as
# shipped) against torch's (zenith_linears replaced by a no-op), interleaved.
import contextlib, copy, sys, time, torch, transformers, zenith
from zenith.quant import calibrate as cal, summary
from zenith.bench.inference import token_batches
torch.set_num_threads(2); torch.manual_seed(0)
base = transformers.BertModel(transformers.BertConfig()).eval()
data = token_batches(1, 128, 0, 30000)
real = cal.zenith_linears
res = {}
for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
    for name in ("zenith-sgemm", "torch-linear"):
        cal.zenith_linears = real if name == "zenith-sgemm" else (lambda m: contextlib.nullcontext())
        m = copy.deepcopy(base)
        t = time.perf_counter()
        zenith.quantize(m, "int8-static", calibration=data)
        dt = time.perf_counter() - t
        s = summary(m)
        res.setdefault(name, []).append(dt)
        res[name + ":layers"] = {l.name: (l.x_scale, l.error) for l in s.layers}
        print(f"{name}: {dt:.1f} s", flush=True)
a, b = res["zenith-sgemm:layers"], res["torch-linear:layers"]
worst_scale = max(abs(a[n][0] / b[n][0] - 1) for n in a)
worst_err = max(abs(a[n][1] - b[n][1]) for n in a)
print(f"layers {len(a)}; max relative scale difference {worst_scale:.2e}; max error difference {worst_err:.2e}")
