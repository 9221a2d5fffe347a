# static_ops.py's context (dynamic model compiled and run first), old forward vs new
import copy, sys, time, statistics, torch, transformers, zenith
from zenith.quant import QLinear
from zenith.bench.inference import token_batches, ENCODER_STATIC
torch.set_num_threads(2); torch.manual_seed(0)
model = transformers.BertModel(transformers.BertConfig()).eval()
x = (torch.randint(0, 30000, (1, 128)), torch.ones(1, 128, dtype=torch.long))
cal = token_batches(1, 128, 0, 30000, samples=20)
order = sys.argv[1:]
ms = {}
for k in order:
    if k == "dyn": ms[k] = zenith.quantize(copy.deepcopy(model), "int8-dynamic")
    else: ms[k] = zenith.quantize(copy.deepcopy(model), "int8-static", calibration=cal, **ENCODER_STATIC)
class OldQLinear(QLinear):
    def forward(self, x):
        if self.x_smooth is not None:
            x = x * self.x_smooth
        return torch.ops.zenith.qlinear(x, self.weight, self.bias, self.format, self.x_scale, self.row_scale)
for k, m in ms.items():
    if k == "old":
        for mm in m.modules():
            if type(mm) is QLinear: mm.__class__ = OldQLinear
with torch.no_grad():
    for k, m in ms.items():
        c = zenith.compile(m)
        for _ in range(3): c(*x)
        ts = []
        for _ in range(10):
            t = time.perf_counter(); c(*x); ts.append(time.perf_counter() - t)
        print(k, f"median {statistics.median(ts)*1e3:.1f} ms")
