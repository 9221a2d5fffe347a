"""A 3x3 conv's backward at one batch, PyTorch's (aten.convolution_backward, oneDNN)
against Zenith's, timed apart for the filters' gradient and the input's, the input's
both ways Zenith can run it (flip_filters + conv2d, conv_transpose2d): median of 20
calls after 3, padding 1, ResNet-18's 224 px stages' small maps. Usage: flip_micro.py
BATCH. (The sixtieth session's conv_grad_micro.py at batch 8, for the importer's
signature since this session.)"""
import statistics as st
import sys
import time

import torch

import zenith  # noqa: F401  (registers the backend)
from zenith import importer

aten = torch.ops.aten
orig = importer._conv_transpose_emit


def via_flip(L, x, w, b, wshape, stride, padding, out_pad, dilation, groups, out_hw, batch):
    return orig(L, x, w, b, wshape, stride, padding, out_pad, dilation, groups, None, None)


def via_columns(L, x, w, b, wshape, stride, padding, out_pad, dilation, groups, out_hw, batch):
    return L.emit("conv_transpose2d", [x, w, b if b is not None else w], stride=list(stride), padding=list(padding),
                  output_padding=list(out_pad), dilation=list(dilation), groups=groups, has_bias=int(b is not None))


def bench(f, n=20):
    for _ in range(3):
        f()
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return st.median(t) * 1e3


res = 224; NB = int(sys.argv[1])
s0 = res // 4  # layer1's map
shapes = [(256, 256, 7, 3, 1), (512, 512, 7, 3, 1), (128, 128, 14, 3, 1)]
print(f"batch {NB}, {res} px stages, {torch.get_num_threads()} threads; ms")
for C, OC, H, K, s in shapes:
    torch.manual_seed(0)
    x, w, p = torch.randn(NB, C, H, H), torch.randn(OC, C, K, K), K // 2
    gy = torch.randn_like(torch.nn.functional.conv2d(x, w, stride=s, padding=p))

    def grad(mask):
        return lambda gy, x, w: aten.convolution_backward(gy, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1,
                                                          mask)[mask.index(True)]
    row = []
    for mask, emits in (([False, True, False], [orig]), ([True, False, False], [via_flip, via_columns])):
        f = grad(mask)
        want = f(gy, x, w)
        row.append(bench(lambda: f(gy, x, w)))
        for emit in emits:
            importer._conv_transpose_emit = emit
            torch._dynamo.reset()
            c = torch.compile(f, backend="zenith", fullgraph=True)
            torch.testing.assert_close(c(gy, x, w), want, rtol=1e-3, atol=1e-2)
            row.append(bench(lambda: c(gy, x, w)))
        importer._conv_transpose_emit = orig
    print(f"  C{C:<3d} OC{OC:<3d} {H:3d}x{H:<3d} k{K} s{s}: filters torch {row[0]:6.2f} zenith {row[1]:6.2f} | "
          f"input torch {row[2]:6.2f} zenith flip+conv2d {row[3]:6.2f} conv_transpose2d {row[4]:6.2f}")
