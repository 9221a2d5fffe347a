// Sibling linears: float32 addmms that read one x as x @ W^T (a transformer's Q, K and V
// projections) become one addmm_parts, whose kernel (sgemm_parts) runs one weight-rows
// GEMM over all their weights' rows, read in place: x^T packed once, the work split
// across threads once, one wait instead of one per projection. Each output keeps its
// value id, so the readers do not change; the values are the same, bit for bit.
// Measured on AMD Zen 5 (family 26 model 2), 2 threads, kernel time of one 3N-row GEMM
// against three N-row ones (N = K): 128 rows, N 384 0.83x; 32 rows 0.73x; 128 rows, N
// 768 0.93x. Models (frozen, in-process A/B): all-MiniLM-L6-v2 seq 128 0.991x the time,
// seq 32 0.984x, BERT-base 0.994x.
// Fused: addmms that linear_reading_weight_in_place accepts (x @ W^T, f32, static rows
// of x that sgemm reads W in place for: more than the skinny kernels take; or symbolic
// rows, which sgemm_parts runs part by part when they turn out few), with no
// activation and their weights and biases graph inputs (defined before the fused node,
// which sits where the first sibling was). Runs after fuse_epilogue: a projection that
// carries an activation stays apart. ZENITH_ADDMM_SIBLINGS=0 turns it off (for A/B measurement).
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "zenith/passes/passes.h"

namespace zenith {

namespace {
bool fusable(const Graph& g, const Node& n) {
  return linear_reading_weight_in_place(g, n) && !n.i("activation", 0) && g.values[size_t(n.inputs[0])].producer < 0;
}
}  // namespace

int fuse_addmm_siblings(Graph& g) {
  if (const char* off = std::getenv("ZENITH_ADDMM_SIBLINGS"); off && std::string(off) == "0") return 0;
  g.reindex();
  std::map<int, std::vector<size_t>> groups;  // by x, in node order
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (fusable(g, g.nodes[i])) groups[g.nodes[i].inputs[1]].push_back(i);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (const auto& [x, members] : groups) {
    if (members.size() < 2) continue;
    Node& first = g.nodes[members[0]];
    first.attrs.clear();  // addmm's; addmm_parts has only parts
    first.op = Op::addmm_parts;
    merge_siblings(g, members, x, 2, 0, dead);  // addmm is (bias, x, w)
    ++fused;
  }
  if (fused) erase_nodes(g, dead);
  return fused;
}

}  // namespace zenith
