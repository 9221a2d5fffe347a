// Sibling int8 qmatmuls: the qmatmuls that read one x with the same settings (a
// transformer's Q, K and V projections) become one qmatmul with parts, whose kernel
// quantizes x once and runs one int8 GEMM over their weights' rows (packed as one
// weight) writing each part's columns into its own output; each output keeps its value
// id, so the readers do not change. all-MiniLM-L6-v2's Q, K and V (128 rows, 384 x 384
// each): 0.083 ms as one qmatmul of 1152 rows against 3 x 0.041; the model int8-dynamic
// at seq 128 0.965x the time, BERT-base 0.987x (AMD Zen 5, AVX-512 VNNI, 2 threads;
// held to AVX2, 0.99x and 1.00x).
// Fused: int8 weights of static rows, each a multiple of 32 (the GEMM's blocks of
// columns), the same row bytes, every weight and bias a graph input (defined before the
// fused node, which sits where the first sibling was; and only inputs the runtime holds
// constant are packed, which the shared GEMM needs), all with a bias or none, one format,
// activation and activation scaling (x_scale, row_scale), and no x_mul or one and the
// same x_mul value (SmoothQuant's multiplier: zenith.quantize gives Q, K and V one, shared;
// x's codes are then the same for all of them).
#include <map>
#include <tuple>
#include <vector>

#include "zenith/attrs.h"
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
bool fusable(const Graph& g, const Node& n) {
  if (n.op != Op::qmatmul || n.i("parts", 1) != 1 || QFormat(n.i("format")) != QFormat::int8) return false;
  const TensorType& w = g.type(n.inputs[1]);
  if (w.rank() != 2 || !w.shape[0].is_const() || w.shape[0].value() <= 0 || w.shape[0].value() % 32 != 0) return false;
  for (size_t k = 1; k < n.inputs.size(); ++k)  // weights and biases: graph inputs
    if (g.values[size_t(n.inputs[k])].producer >= 0) return false;
  return true;
}

// What must match for two qmatmuls to share a GEMM: x, row bytes, activation, scaling,
// input count and the x_mul value (-1: none).
using Key = std::tuple<int, int64_t, int64_t, double, int64_t, size_t, int>;
Key key_of(const Graph& g, const Node& n) {
  return {n.inputs[0], g.type(n.inputs[1]).shape[1].value(), n.i("activation", 0),
          n.has("x_scale") ? n.f("x_scale") : -1.0, n.i("row_scale", 0), n.inputs.size(),
          n.i("x_mul", 0) ? n.inputs.back() : -1};
}
}  // namespace

int fuse_qmatmul_siblings(Graph& g) {
  g.reindex();
  std::map<Key, std::vector<size_t>> groups;  // in node order
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (fusable(g, g.nodes[i])) groups[key_of(g, g.nodes[i])].push_back(i);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const int x_mul = std::get<6>(key);
    const bool bias = std::get<5>(key) == (x_mul >= 0 ? 4u : 3u);
    Node& first = merge_siblings(g, members, std::get<0>(key), 1, bias ? 2 : -1, dead);  // (x, w[, bias][, x_mul])
    if (x_mul >= 0) first.inputs.push_back(x_mul);
    ++fused;
  }
  if (fused) erase_nodes(g, dead);
  return fused;
}

}  // namespace zenith
