// Common-subexpression elimination: two nodes with the same op, the same inputs and
// the same attributes compute the same values; later uses move to the first one.
// Constants are merged when their bytes are equal and small (<= 256 bytes), or when
// they borrow the same memory. Leaves the now-unused node for DCE to remove.
#include <cstring>
#include <map>
#include <sstream>

#include "zenith/passes/passes.h"

namespace zenith {

namespace {
std::string key_of(const Graph& g, const Node& n) {
  std::ostringstream os;
  os << int(n.op) << '(';
  for (int v : n.inputs) os << v << ',';
  os << ')';
  for (const auto& [k, a] : n.attrs) {
    os << k << '=' << int(a.kind) << ':';
    for (const auto& s : a.ints) os << s.str(g.symbols) << ',';
    for (double f : a.floats) os << f << ',';
    os << a.str << ';';
  }
  if (n.constant) {
    if (n.constant->nbytes <= 256) os.write(static_cast<const char*>(n.constant->data), std::streamsize(n.constant->nbytes));
    else os << "@" << n.constant->data;
  }
  return os.str();
}
}  // namespace

int common_subexpression_elimination(Graph& g) {
  std::map<std::string, size_t> seen;
  int merged = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::string key = key_of(g, g.nodes[i]);
    auto [it, fresh] = seen.emplace(key, i);
    if (fresh) continue;
    const Node& first = g.nodes[it->second];
    for (size_t k = 0; k < first.outputs.size(); ++k) replace_all_uses(g, g.nodes[i].outputs[k], first.outputs[k]);
    ++merged;
  }
  return merged;
}

}  // namespace zenith
