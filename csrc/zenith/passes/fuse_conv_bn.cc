// Convolution + batch-norm fusion (inference): a batch_norm whose input is a conv2d
// result used nowhere else becomes that conv's epilogue. The conv takes the norm's
// four per-channel tensors (weight, bias, running mean, running var) as inputs 3..6
// and the norm's eps as `bn_eps`; its kernel scales and shifts each output channel
// right after that channel's GEMM, while the rows are still in cache, instead of a
// second pass over the whole output. The activation that follows (relu and friends)
// then joins the conv through fuse_epilogue, which runs after this pass.
// Leaves alone: a conv result that is also read elsewhere or returned (its raw value
// is needed), a conv that already carries a norm, and non-float32 values.
#include "zenith/passes/passes.h"

namespace zenith {

int fuse_conv_bn(Graph& g) {
  g.reindex();
  std::vector<int> uses = g.use_counts();
  std::vector<bool> absorbed(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& bn = g.nodes[i];
    if (bn.op != Op::batch_norm) continue;
    int x = bn.inputs[0];
    int p = g.values[size_t(x)].producer;
    if (p < 0 || uses[size_t(x)] != 1 || g.type(x).dtype != DType::f32) continue;
    Node& conv = g.nodes[size_t(p)];
    if (conv.op != Op::conv2d || conv.inputs.size() != 3) continue;
    for (int k = 1; k <= 4; ++k) conv.inputs.push_back(bn.inputs[size_t(k)]);
    conv.set_float("bn_eps", bn.f("eps"));
    replace_all_uses(g, bn.outputs[0], x);
    uses[size_t(x)] = uses[size_t(bn.outputs[0])];
    absorbed[i] = true;  // erased now, so the next pass counts the conv's real readers
    ++fused;
  }
  if (fused) erase_nodes(g, absorbed);
  return fused;
}

}  // namespace zenith
