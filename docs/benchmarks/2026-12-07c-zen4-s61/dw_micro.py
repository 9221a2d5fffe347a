"""A depthwise 3x3 conv's backward (MobileNet V2's, batch 8 at 112 px), PyTorch's
(aten.convolution_backward) against Zenith's (the same call compiled), timed apart for
the filters' gradient and the input's; the input's both ways Zenith can run it
(flip_filters + conv2d's depthwise kernels, conv_transpose2d's depthwise loop):
median of 20 calls after 3, padding 1. Usage: dw_micro.py."""
import statistics as st
import time

import torch

import zenith  # noqa: F401  (registers the backend)
from zenith import importer

aten = torch.ops.aten
orig = importer._conv_transpose_emit


def via_flip(L, x, w, b, wshape, stride, padding, out_pad, dilation, groups, out_hw, batch):
    if list(stride) != [1, 1]:
        return via_columns(L, x, w, b, wshape, stride, padding, out_pad, dilation, groups, out_hw, batch)
    wf = L.emit("flip_filters", [w], groups=groups)
    return L.emit("conv2d", [x, wf, wf], stride=[1, 1], padding=[dilation[i] * (wshape[2 + i] - 1) - padding[i]
                                                               for i in range(2)],
                  dilation=list(dilation), groups=groups, has_bias=0)


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


shapes = [(576, 7, 1), (384, 7, 1), (960, 4, 1), (192, 14, 1), (144, 28, 1), (96, 56, 1), (144, 56, 2), (96, 56, 2),
          (192, 28, 2), (576, 14, 2)]
print(f"batch 8, depthwise 3x3, {torch.get_num_threads()} threads; ms")
for C, H, s in shapes:
    torch.manual_seed(0)
    x, w = torch.randn(8, C, H, H), torch.randn(C, 1, 3, 3)
    gy = torch.randn_like(torch.nn.functional.conv2d(x, w, stride=s, padding=1, groups=C))

    def grad(mask):
        return lambda gy, x, w: aten.convolution_backward(gy, x, w, None, [s, s], [1, 1], [1, 1], False, [0, 0], C,
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
            torch.testing.assert_close(c(gy, x, w), want, rtol=1e-3, atol=1e-3)
            row.append(bench(lambda: c(gy, x, w)))
        importer._conv_transpose_emit = orig
    print(f"  C{C:<4d} {H:3d}x{H:<3d} s{s}: filters torch {row[0]:6.3f} zenith {row[1]:6.3f} | input torch {row[2]:6.3f} "
          f"zenith flip+conv2d {row[3]:6.3f} conv_transpose2d {row[4]:6.3f}")
