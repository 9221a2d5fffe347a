"""One Zenith segment: a maximal run of natively supported ATen nodes, lowered to a
Zenith graph, put through the pass pipeline and compiled into an Executable.

The segment only records what the call path needs (its inputs as fx nodes with
their layouts, its outputs, the symbols it binds); it does not run itself
(callpath.py generates the code that calls it).
"""
from __future__ import annotations

import torch

from zenith import _C
from zenith.callpath import _nodes_in
from zenith.importer import CONVERTERS, Lowering

_VIEW_OPS = {torch.ops.aten.t.default, torch.ops.aten.permute.default, torch.ops.aten.transpose.int}
# Ops whose output is a view of their first input (one tensor; split's tuples aside).
VIEWS = {getattr(torch.ops.aten, name).default for name in (
    "t", "permute", "expand", "alias", "view", "_unsafe_view", "squeeze", "unsqueeze", "view_as_real",
    "as_strided")} | {
    torch.ops.aten.transpose.int, torch.ops.aten.slice.Tensor, torch.ops.aten.select.int,
    torch.ops.aten.squeeze.dim, torch.ops.aten.squeeze.dims, torch.ops.aten.narrow.default,
    torch.ops.aten.diagonal.default, torch.ops.aten.unfold.default, torch.ops.aten.detach.default}


def _views_of_returned(nodes):
    """The segment's nodes that PyTorch must make as views (a set): every graph
    output that is a view (through a chain of views inside the segment) of another graph
    output the segment computes, and the chain's views. Eager returns such an output as a
    window on the other one's storage, so an in-place change to either shows in both;
    Zenith writes each output as a tensor of its own. (Views of graph inputs are
    AOTAutograd's: it remakes them from the input.) A view with a size from a symbolic
    expression (a SymInt node) or keyword arguments is left to the segment: the call
    evaluates SymInt nodes only for fallback nodes and passes a view its positional
    arguments, so the output is then a tensor of its own, with eager's values. Inference
    graphs only: a training forward also returns the tensors saved for backward, and a user
    output made a view of one would let an in-place change to it rewrite what backward
    reads (AOTAutograd hands such an output out through _unsafe_view, with a version
    counter of its own: wrong gradients where eager raises)."""
    inside = set(nodes)
    returned = {n for n in nodes if any(u.op == "output" for u in n.users)}
    chosen = set()
    for n in nodes:
        if n not in returned or n.target not in VIEWS:
            continue
        chain, src = [], n
        while src in inside and src.op == "call_function" and src.target in VIEWS and src.args \
                and isinstance(src.args[0], torch.fx.Node) and not src.kwargs and not _nodes_in(src.args[1:]):
            chain.append(src)
            src = src.args[0]
            if src in returned:
                break
        if src in returned and src in inside:
            chosen.update(chain)
    return chosen


class Segment:
    def __init__(self, index):
        self.index = index  # position among the graph's segments
        self.nodes = []  # fx nodes, in graph order

    def lower(self, gm, users_outside, options, report):
        """Builds and compiles the Zenith graph. users_outside(n): whether fx node n is
        read outside this segment (so it must be one of its outputs)."""
        L = Lowering(gm)
        for n in self.nodes:
            L.env[n] = CONVERTERS[n.target](L, n)
        self.out_nodes = [n for n in self.nodes if users_outside(n)]
        # A transpose of a graph input that leaves the segment (AOTAutograd saves weight
        # transposes for backward) is a free view in PyTorch but a full copy as a Zenith
        # output: PyTorch makes it; uses inside the segment still see it (as trans_b).
        self.torch_views = [n for n in self.out_nodes if n.target in _VIEW_OPS and isinstance(n.args[0], torch.fx.Node)
                            and n.args[0].op in ("placeholder", "get_attr")]
        if len(self.torch_views) == len(self.out_nodes):
            self.torch_views = []
        # Outputs that are views of other outputs stay views of them, as eager returns them
        # (unless nothing would be left for the segment to return).
        made = set(self.torch_views) | (_views_of_returned(self.nodes) if options.get("inference") else set())
        if any(n not in made for n in self.out_nodes):
            self.torch_views = [n for n in self.nodes if n in made]
        views = set(self.torch_views)
        self.out_nodes = [n for n in self.out_nodes if n not in views]
        outs = []
        for n in self.out_nodes:
            v = L.env[n]
            if isinstance(v, tuple):
                raise RuntimeError(f"zenith: tuple value {n.name} escapes its segment")
            outs.append(v)
        L.g.set_outputs(outs)
        if options.get("passes", True):
            for name, changes in L.g.run_passes(options.get("verify", False)):
                report.passes[name] = report.passes.get(name, 0) + changes
        self.op_counts = L.g.op_counts()
        for op, c in self.op_counts.items():
            report.zenith_ops[op] = report.zenith_ops.get(op, 0) + c
        # Every symbol the graph mentions (input shapes, view sizes, slice bounds); the
        # runtime receives each one's value at call time, in this order.
        self.symbols = list(L.g.symbols)
        self.exe = _C.Executable(L.g, self.symbols)
        self.in_nodes = L.inputs  # fx nodes, in the order of the graph's inputs
        self.in_perms = L.input_perms  # per input: None, or the permute that makes it contiguous
        self.keepalive = L.const_keepalive  # tensors whose memory the graph borrows as constants
        self.graph = L.g
