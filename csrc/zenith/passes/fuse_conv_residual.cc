// Convolution + residual add fusion: add(conv2d(...), r), where the conv result is read
// only by that add and r has the add's exact shape (no broadcast; a symbolic dim the same
// expression), becomes the conv with
// r as its last input (`has_residual`): its epilogue adds r to each output tile after the
// bias / folded batch-norm and before its activation, so a ResNet block's
// relu(bn(conv(x)) + identity) is one kernel and the separate pass over the output (read
// two tensors, write one) disappears. Runs after fuse_conv_bn (the norm comes first) and
// before fuse_epilogue (the relu after the add then joins the conv).
// The conv reads r while it runs, so r must be computed before it: of two fusable convs
// (a block with a downsample branch: add(conv3, downsample)) the later one takes the
// other as its residual; a conv whose residual would come after it is left alone.
// Leaves alone: a conv read elsewhere or returned, one with an activation or a residual
// already, non-float32 values, and adds that broadcast (the importer turns add's alpha
// into a mul before it).
#include "zenith/passes/passes.h"

namespace zenith {

int fuse_conv_residual(Graph& g) {
  g.reindex();
  std::vector<int> uses = g.use_counts();
  std::vector<bool> absorbed(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& add = g.nodes[i];
    if (add.op != Op::add) continue;
    const TensorType& out = g.type(add.outputs[0]);
    if (out.dtype != DType::f32) continue;
    // The conv (operand `side`) that can absorb the add, the later of two if both can.
    int best = -1, best_side = -1;
    for (int side = 0; side < 2; ++side) {
      int v = add.inputs[size_t(side)], r = add.inputs[size_t(1 - side)];
      int p = g.values[size_t(v)].producer;
      if (p < 0 || uses[size_t(v)] != 1 || v == r) continue;
      const Node& conv = g.nodes[size_t(p)];
      if (conv.op != Op::conv2d || conv.i("activation", 0) != 0 || conv.i("has_residual", 0) != 0) continue;
      if (!same_shape(g.type(v).shape, out.shape) || !same_shape(g.type(r).shape, out.shape) || g.type(r).dtype != DType::f32)
        continue;
      if (g.values[size_t(r)].producer >= p) continue;  // r is not ready when the conv runs
      if (p > best) {
        best = p;
        best_side = side;
      }
    }
    if (best < 0) continue;
    Node& conv = g.nodes[size_t(best)];
    int v = add.inputs[size_t(best_side)], r = add.inputs[size_t(1 - best_side)];
    conv.inputs.push_back(r);
    conv.set_int("has_residual", 1);
    replace_all_uses(g, add.outputs[0], v);
    uses[size_t(v)] = uses[size_t(add.outputs[0])];
    absorbed[i] = true;
    ++fused;
  }
  if (fused) erase_nodes(g, absorbed);
  return fused;
}

}  // namespace zenith
