#include <functional>
#include <queue>

#include "zenith/error.h"
#include "zenith/kernels/kernels.h"
#include "zenith/passes/passes.h"

namespace zenith {

void replace_all_uses(Graph& g, int from, int to) {
  for (Node& n : g.nodes)
    for (int& v : n.inputs)
      if (v == from) v = to;
  for (int& v : g.outputs)
    if (v == from) v = to;
}

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same(b[i])) return false;
  return true;
}

bool const_pair(const Node& n, const char* key, int64_t dflt, std::array<int64_t, 2>& out) {
  out = {dflt, dflt};
  if (!n.has(key)) return true;
  const auto& p = n.ints(key);
  for (size_t j = 0; j < 2 && j < p.size(); ++j) {
    if (!p[j].is_const()) return false;
    out[j] = p[j].value();
  }
  return true;
}

void erase_nodes(Graph& g, const std::vector<bool>& dead) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  g.reindex();
}

bool restore_topological_order(Graph& g) {
  g.reindex();
  const size_t n = g.nodes.size();
  std::vector<int> waiting(n, 0);            // inputs of each node not yet defined
  std::vector<std::vector<int>> readers(n);  // node -> nodes reading one of its outputs
  bool ordered = true;
  for (size_t i = 0; i < n; ++i)
    for (int v : g.nodes[i].inputs) {
      int p = g.values[size_t(v)].producer;
      if (p < 0) continue;  // a graph input
      ++waiting[i];
      readers[size_t(p)].push_back(int(i));
      if (size_t(p) >= i) ordered = false;
    }
  if (ordered) return false;
  // Kahn's algorithm taking the ready node of lowest index first: nodes keep their
  // order wherever it is valid, so a pass's local change moves only what it must.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(int(i));
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int r : readers[size_t(i)])
      if (--waiting[size_t(r)] == 0) ready.push(r);
  }
  ZENITH_CHECK(order.size() == n, "the graph has a cycle: ", n - order.size(), " nodes depend on their own results");
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(g.nodes[size_t(i)]));
  g.nodes = std::move(sorted);
  g.reindex();
  return true;
}

bool linear_reading_weight_in_place(const Graph& g, const Node& n) {
  if (n.op != Op::addmm || n.outputs.size() != 1 || n.i("trans_a", 0) || !n.i("trans_b", 0) || n.i("trans_c", 0) ||
      n.f("alpha", 1.0) != 1.0 || n.f("beta", 1.0) != 1.0)
    return false;
  const TensorType &bias = g.type(n.inputs[0]), &x = g.type(n.inputs[1]), &w = g.type(n.inputs[2]);
  if (x.dtype != DType::f32 || x.rank() != 2 || !x.shape[1].is_const() || !w.is_static() ||
      g.values[size_t(n.inputs[2])].producer >= 0)
    return false;
  const int64_t N = w.shape[0].value(), K = w.shape[1].value();
  // Symbolic rows (a batch or sequence length) are taken: the rewritten kernels fall back
  // at run time where the rows are too few (sgemm_parts part by part, sgemm_ct through a
  // transpose, panels only where sgemm_handoff_panels holds).
  return bias.rank() == 1 && bias.shape[0].is_const() && bias.shape[0].value() == N &&
         (!x.shape[0].is_const() || sgemm_reads_weight_in_place(x.shape[0].value(), 1, K));
}

Node& merge_siblings(Graph& g, const std::vector<size_t>& members, int x, int w_slot, int b_slot,
                     std::vector<bool>& dead) {
  std::vector<int> inputs{x}, biases, outputs;
  for (size_t i : members) {
    const Node& n = g.nodes[i];
    inputs.push_back(n.inputs[size_t(w_slot)]);
    if (b_slot >= 0) biases.push_back(n.inputs[size_t(b_slot)]);
    outputs.push_back(n.outputs[0]);
    if (i != members[0]) dead[i] = true;
  }
  inputs.insert(inputs.end(), biases.begin(), biases.end());
  Node& first = g.nodes[members[0]];
  first.inputs = std::move(inputs);
  first.outputs = std::move(outputs);
  first.set_int("parts", int64_t(members.size()));
  return first;
}

}  // namespace zenith
