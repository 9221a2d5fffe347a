"""Zenith kernel time per (op, output shape) over one training step of a torchvision CNN
(batch 8, 112 x 112 unless given), from zenith.profile; the convolution ops and the
total per op. Usage: conv_bwd_profile.py MODEL [BATCH SIZE]."""
import collections
import sys

import torch
import torchvision

import zenith

name = sys.argv[1]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 8
size = int(sys.argv[3]) if len(sys.argv) > 3 else 112
torch.manual_seed(0)
m = getattr(torchvision.models, name)(num_classes=1000).train()
x = torch.randn(batch, 3, size, size)
c = torch.compile(m, backend="zenith")


def run():
    m.zero_grad(set_to_none=True)
    c(x).pow(2).mean().backward()


for _ in range(3):
    run()
with zenith.profile(trace="/tmp/conv_bwd_trace.json") as p:  # events are kept only with a trace
    run()
agg, per_op = collections.defaultdict(lambda: [0, 0.0]), collections.defaultdict(float)
for (op, node, graph, tid, ts, dur, shape) in p.events:
    agg[(op, tuple(shape))][0] += 1
    agg[(op, tuple(shape))][1] += dur
    per_op[op] += dur
print(f"{name} batch {batch} {size} px, {torch.get_num_threads()} threads: kernel time per op (ms)")
for op, d in sorted(per_op.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {op:20s} {d / 1e3:8.2f}")
print("convolution ops by output shape:")
for k, (n, d) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    if "conv" in k[0] or "flip" in k[0]:
        print(f"  {k[0]:20s} {str(k[1]):22s} x{n:3d} {d / 1e3:8.3f} ms  {d / n:8.1f} us")
by_graph = collections.defaultdict(float)
for (op, node, graph, tid, ts, dur, shape) in p.events:
    if op == "conv2d":
        by_graph[graph] += dur
print("conv2d time per graph (forward first):", ", ".join(f"{d / 1e3:.2f} ms" for g, d in sorted(by_graph.items())))
