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

}  // namespace zenith
