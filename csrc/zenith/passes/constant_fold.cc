// Constant folding: evaluates, at compile time, nodes whose inputs are all constants
// (and source ops such as full/arange with static shapes), by running them through
// the runtime itself, and replaces them with owned constants.
// Leaves alone: results larger than kMaxFoldBytes (folding an expand would trade a
// cheap kernel for resident memory), and anything with symbolic shapes.
#include "zenith/passes/passes.h"
#include "zenith/error.h"
#include "zenith/runtime.h"

namespace zenith {
namespace {
constexpr size_t kMaxFoldBytes = size_t(1) << 20;
}

int constant_folding(Graph& g) {
  int folded = 0;
  std::vector<bool> is_const(g.values.size(), false);
  for (const Node& n : g.nodes)
    if (n.op == Op::constant) is_const[size_t(n.outputs[0])] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.op == Op::constant) continue;
    bool all_const = true;
    for (int v : n.inputs) all_const = all_const && is_const[size_t(v)];
    if (!all_const) continue;
    bool small = true;
    for (int o : n.outputs) {
      const TensorType& t = g.type(o);
      small = small && t.is_static() && size_t(t.static_numel()) * dtype_size(t.dtype) <= kMaxFoldBytes;
    }
    bool symbolic_attr = false;
    for (const auto& [k, a] : n.attrs)
      for (const auto& s : a.ints) symbolic_attr = symbolic_attr || !s.is_const();
    if (!small || symbolic_attr) continue;
    // A one-node graph whose inputs are the constants, run by the runtime.
    Graph sub;
    std::vector<int> sub_in;
    for (int v : n.inputs) {
      const Node& src = g.nodes[size_t(g.values[size_t(v)].producer)];
      sub_in.push_back(sub.add_constant(g.type(v), src.constant->data, src.constant->nbytes, src.constant->owner));
    }
    sub.outputs = sub.add_node(n.op, sub_in, n.attrs);
    std::vector<OutTensor> outs;
    try {
      outs = Executable(std::move(sub)).run({}, {});
    } catch (const Error&) {
      continue;  // e.g. an out-of-range index: leave it to fail at run time, where it is reported
    }
    // The folded node becomes constants defining the very same value ids, so no uses change.
    std::vector<Node> replacement;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      Node c;
      c.op = Op::constant;
      c.outputs = {n.outputs[k]};
      c.set_int("dtype", int64_t(g.type(n.outputs[k]).dtype));
      c.set_ints("shape", g.type(n.outputs[k]).shape);
      auto cd = std::make_shared<ConstData>();
      int64_t numel = g.type(n.outputs[k]).static_numel();
      cd->nbytes = size_t(numel) * dtype_size(g.type(n.outputs[k]).dtype);
      cd->owner = outs[k].storage;
      cd->data = outs[k].data;
      c.constant = cd;
      is_const[size_t(n.outputs[k])] = true;
      replacement.push_back(std::move(c));
    }
    g.nodes.erase(g.nodes.begin() + long(i));
    g.nodes.insert(g.nodes.begin() + long(i), replacement.begin(), replacement.end());
    i += replacement.size() - 1;
    ++folded;
  }
  if (folded) g.reindex();
  return folded;
}

}  // namespace zenith
