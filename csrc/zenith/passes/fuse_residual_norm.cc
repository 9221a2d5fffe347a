// Residual + LayerNorm: layer_norm(add(a, b)) where the add's result is read by nothing
// else (post-norm transformers: BERT's LayerNorm(x + sublayer(x))) becomes
// layer_norm(a, w, bias, b), whose kernel adds the residual as it reads each row, so
// the sum is never written to memory and read back. Both add operands must already
// have the norm's input shape and be float32 (no broadcasting inside the norm).
// Leaves alone: sums that are also read elsewhere (pre-norm models keep the sum as the
// next residual) or returned, and a layer_norm that already has a residual.
#include "zenith/passes/passes.h"

namespace zenith {

int fuse_residual_norm(Graph& g) {
  g.reindex();
  std::vector<int> uses = g.use_counts();
  int fused = 0;
  for (Node& n : g.nodes) {
    if (n.op != Op::layer_norm || n.inputs.size() != 3) continue;
    int x = n.inputs[0], p = g.values[size_t(x)].producer;
    if (p < 0 || uses[size_t(x)] != 1 || g.type(x).dtype != DType::f32) continue;
    const Node& add = g.nodes[size_t(p)];
    if (add.op != Op::add) continue;
    int a = add.inputs[0], b = add.inputs[1];
    if (g.type(a).dtype != DType::f32 || !same_shape(g.type(a).shape, g.type(x).shape) ||
        !same_shape(g.type(b).shape, g.type(x).shape))
      continue;
    n.inputs = {a, n.inputs[1], n.inputs[2], b};
    uses[size_t(x)] = 0;  // the add is dead; dce drops it
    ++fused;
  }
  return fused;
}

}  // namespace zenith
