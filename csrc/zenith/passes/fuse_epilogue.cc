// Epilogue fusion: an activation (relu, gelu exact or tanh, silu, tanh, relu6 as
// clamp(0, 6), hardswish, hardsigmoid) whose only input is an addmm, qmatmul or conv2d
// result used nowhere else becomes that op's `activation` attribute, so the linear layer
// (float or quantized) or convolution writes its activated output in one kernel and the intermediate buffer
// disappears. Reshapes between the two are looked through (an elementwise op commutes
// with a reshape; PyTorch puts a view between linear's addmm and the activation
// whenever the input has more than two dims). Leaves alone: a result that is also read
// elsewhere or returned (its un-activated value is needed), an op that already carries
// an activation, a clamp other than (0, 6), and non-float32 values (half types compute
// through float32 conversions around ops).
#include "zenith/kernels/kernels.h"
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
Activation activation_of(const Node& n) {
  switch (n.op) {
    case Op::relu: return Activation::kRelu;
    case Op::gelu: return n.i("approximate", 0) ? Activation::kGeluTanh : Activation::kGelu;
    case Op::silu: return Activation::kSilu;
    case Op::tanh: return Activation::kTanh;
    case Op::hardswish: return Activation::kHardswish;
    case Op::hardsigmoid: return Activation::kHardsigmoid;
    case Op::clamp:  // ReLU6 only (hardtanh(0, 6) imports as this clamp)
      return n.has("min") && n.has("max") && n.f("min") == 0.0 && n.f("max") == 6.0 ? Activation::kRelu6
                                                                                   : Activation::kNone;
    default: return Activation::kNone;
  }
}
}  // namespace

int fuse_epilogue(Graph& g) {
  g.reindex();
  std::vector<int> uses = g.use_counts();
  std::vector<bool> absorbed(g.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    Activation act = activation_of(n);
    if (act == Activation::kNone) continue;
    int x = n.inputs[0];  // the activation's input: the value that takes its place
    if (g.type(x).dtype != DType::f32) continue;
    int v = x, p = g.values[size_t(v)].producer;
    bool single = uses[size_t(v)] == 1;
    while (single && p >= 0 && g.nodes[size_t(p)].op == Op::reshape) {
      v = g.nodes[size_t(p)].inputs[0];
      p = g.values[size_t(v)].producer;
      single = uses[size_t(v)] == 1;
    }
    if (!single || p < 0) continue;
    Node& mm = g.nodes[size_t(p)];
    // (one output: a qmatmul with parts applies its activation to every part)
    if (!has_trait(mm.op, kTakesActivation) || mm.i("activation", 0) != 0 || mm.outputs.size() != 1) continue;
    mm.set_int("activation", int64_t(act));
    replace_all_uses(g, n.outputs[0], x);
    uses[size_t(x)] = uses[size_t(n.outputs[0])];
    absorbed[i] = true;  // erased now, so later passes count the producer's real readers
    ++fused;
  }
  if (fused) erase_nodes(g, absorbed);
  return fused;
}

}  // namespace zenith
