// Elementwise fusion: any connected chain of float32 elementwise ops (the ops
// run_fused can run: unary math and activations, add/sub/mul/div, maximum/minimum,
// pow) whose intermediate results have the chain's output shape and are read only
// inside the chain becomes one `fused` node. Its kernel walks the output once, in
// tiles that stay in L1, instead of writing and re-reading every intermediate tensor
// (GELU written out, its backward, scaling and residual chains, SwiGLU's gate).
// Inputs may broadcast (biases, scalar constants); an intermediate that would have
// to broadcast up (a smaller shape) stays outside, as does any value also read
// elsewhere or returned. Chains are grown from their last op backwards, in reverse
// topological order, so each node joins at most one chain; a lone op is left as is.
#include <algorithm>

#include "zenith/kernels/kernels.h"
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
bool candidate(const Graph& g, const Node& n) {
  if (!has_trait(n.op, kFusable) || n.outputs.size() != 1 || g.type(n.outputs[0]).dtype != DType::f32) return false;
  if (n.op == Op::div && n.i("rounding", 0) != 0) return false;
  if (n.op == Op::pow && n.i("tensor_exponent", 0) != 0) return false;  // (fused chains take a scalar's forms)
  for (int v : n.inputs)
    if (g.type(v).dtype != DType::f32) return false;
  return true;
}
}  // namespace

int fuse_elementwise(Graph& g) {
  g.reindex();
  std::vector<int> uses = g.use_counts();
  std::vector<bool> is_output(g.values.size(), false);
  for (int v : g.outputs) is_output[size_t(v)] = true;
  std::vector<int> chain_of(g.nodes.size(), -1);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (int root = int(g.nodes.size()) - 1; root >= 0; --root) {
    if (chain_of[size_t(root)] >= 0 || !candidate(g, g.nodes[size_t(root)])) continue;
    const Shape& shape = g.type(g.nodes[size_t(root)].outputs[0]).shape;
    std::vector<int> members{root};
    chain_of[size_t(root)] = root;
    // Grow until no producer can join: one joins when it is a candidate of the chain's
    // shape and every read of its result comes from the chain.
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t m = 0; m < members.size(); ++m)
        for (int v : g.nodes[size_t(members[m])].inputs) {
          int p = g.values[size_t(v)].producer;
          if (p < 0 || chain_of[size_t(p)] >= 0 || is_output[size_t(v)]) continue;
          const Node& pn = g.nodes[size_t(p)];
          if (!candidate(g, pn) || !same_shape(g.type(v).shape, shape)) continue;
          int inside = 0;
          for (int q : members)
            for (int w : g.nodes[size_t(q)].inputs) inside += w == v;
          if (inside != uses[size_t(v)]) continue;
          members.push_back(p);
          chain_of[size_t(p)] = root;
          grew = true;
        }
    }
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end());  // topological order
    // Registers: the chain's outside inputs first (each once), then one per step.
    std::vector<int> inputs, reg_of(g.values.size(), -1);
    for (int q : members)
      for (int v : g.nodes[size_t(q)].inputs) {
        int p = g.values[size_t(v)].producer;
        bool inner = p >= 0 && chain_of[size_t(p)] == root;
        if (!inner && reg_of[size_t(v)] < 0) {
          reg_of[size_t(v)] = int(inputs.size());
          inputs.push_back(v);
        }
      }
    std::vector<SymInt> program;
    int next = int(inputs.size());
    for (int q : members) {
      const Node& n = g.nodes[size_t(q)];
      program.push_back(SymInt(int64_t(n.op)));
      program.push_back(SymInt(int64_t(reg_of[size_t(n.inputs[0])])));
      program.push_back(SymInt(int64_t(n.inputs.size() > 1 ? reg_of[size_t(n.inputs[1])] : -1)));
      program.push_back(SymInt(n.op == Op::gelu ? n.i("approximate", 0) : int64_t(0)));
      reg_of[size_t(n.outputs[0])] = next++;
      if (q != root) dead[size_t(q)] = true;
    }
    // The root becomes the fused node in place: same output value, so readers and
    // graph outputs are unchanged.
    Node& r = g.nodes[size_t(root)];
    r.op = Op::fused;
    r.inputs = inputs;
    r.attrs.clear();
    r.set_ints("program", program);
    ++fused;
  }
  if (fused) erase_nodes(g, dead);
  return fused;
}

}  // namespace zenith
