// Dead-code elimination: removes nodes none of whose outputs reach a graph output.
// Leaves alone: graph inputs (the caller's signature is fixed), and every node that
// feeds an output, however cheap. Assumes all ops are pure, which holds for the IR.
#include "zenith/passes/passes.h"

namespace zenith {

int dead_code_elimination(Graph& g) {
  std::vector<bool> live_value(g.values.size(), false);
  for (int v : g.outputs) live_value[size_t(v)] = true;
  std::vector<bool> dead(g.nodes.size(), true);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool live = false;
    for (int o : n.outputs) live = live || live_value[size_t(o)];
    if (!live) continue;
    dead[i] = false;
    for (int v : n.inputs) live_value[size_t(v)] = true;
  }
  int removed = 0;
  for (bool d : dead) removed += d;
  if (removed) erase_nodes(g, dead);
  return removed;
}

}  // namespace zenith
