# Single convs + bn + activation, in-process A/B of one switch of ab_switches.diff
# (ab_common), from the repository root after `git apply` of it:
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_ops.py depthwise 30   (ZC: per plane)
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_ops.py stem 20        (ZD: GEMM per image)
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_ops.py batched 20     (ZB: im2col; 1x1
#                                                  stride-1 convs take im2col either way: a noise check)
import os
import sys

import torch

import zenith

sys.path.insert(0, os.path.dirname(__file__))
from ab_common import interleave, line  # noqa: E402

torch.set_num_threads(2)
nn = torch.nn
# (N, C, H, OC, kernel, stride, dilation, groups = C?)
CASES = {
    "depthwise": ("ZC", [(N, C, H, C, 3, s, 1, True) for N, C, H, s in [
        (1, 384, 14, 1), (1, 576, 14, 1), (1, 576, 14, 2), (1, 960, 7, 1), (8, 960, 7, 1), (8, 384, 14, 1),
        (1, 192, 28, 1), (1, 144, 56, 2), (1, 96, 112, 2), (2, 37, 9, 1), (8, 144, 28, 1)]]),
    "stem": ("ZD", [(N, C, H, OC, k, s, 1, False) for N, C, H, OC, k, s in [
        (1, 3, 224, 64, 7, 2), (8, 3, 224, 64, 7, 2), (1, 3, 224, 32, 3, 2), (8, 3, 224, 32, 3, 2),
        (2, 3, 31, 10, 5, 3), (1, 1, 28, 20, 3, 1), (3, 4, 17, 9, 3, 1)]]),
    "batched": ("ZB", [(N, C, H, OC, k, s, d, False) for N, C, H, OC, k, s, d in [
        (8, 256, 28, 256, 3, 2, 1), (8, 512, 14, 512, 3, 2, 1), (8, 512, 28, 1024, 1, 2, 1),
        (8, 1024, 14, 256, 1, 1, 1), (8, 2048, 7, 512, 1, 1, 1), (8, 512, 7, 512, 3, 1, 1),
        (2, 96, 17, 80, 3, 1, 2), (3, 64, 20, 40, 5, 2, 1), (8, 64, 20, 64, 3, 1, 3)]]),
}
var, cases = CASES[sys.argv[1]]
R = int(sys.argv[2]) if len(sys.argv) > 2 else 15
for N, C, H, OC, k, s, d, dw in cases:
    torch._dynamo.reset()  # a fresh code cache per case (Dynamo's recompile limit)
    m = nn.Sequential(nn.Conv2d(C, OC, k, s, d * (k // 2), dilation=d, groups=C if dw else 1, bias=False),
                      nn.BatchNorm2d(OC), nn.ReLU6() if dw else nn.ReLU()).eval()
    m[0].weight.data.normal_()
    m[1].running_var.uniform_(0.5, 2)
    m[1].running_mean.normal_()
    m[1].weight.data.normal_()
    m[1].bias.data.normal_()
    x = torch.randn(N, C, H, H)
    with torch.no_grad():
        ref = m(x)
    print(line(f"N{N} C{C} H{H} OC{OC} k{k} s{s} d{d}", interleave(zenith.compile(m), x, ref, var, R)), flush=True)
