// Attention layout: the (B, L, H, E) <-> (B, H, L, E) permutes around sdpa disappear.
// Transformer attention reshapes each projection to (B, L, H, E), permutes it to
// (B, H, L, E) for sdpa, and permutes sdpa's result back before the output
// projection; each permute is a full copy here. When q, k and v are all such permutes
// and sdpa's result is only read by the permute back, sdpa reads the unpermuted
// tensors and writes the permuted-back layout itself (`layout` = 1: rows of a head are
// H * E apart). The permute back is erased here: it would read sdpa's result, whose
// type is now the permuted one, and fail the verifier run after this pass. The
// operand permutes, still well-typed, are left for dce.
// Leaves alone: sdpa already in layout 1, any operand that is not perm [0, 2, 1, 3],
// and a result that is read elsewhere or returned in (B, H, L, E).
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
bool swaps_l_and_h(const Node& n) {
  if (n.op != Op::permute) return false;
  auto p = n.const_ints("perm");
  return p == std::vector<int64_t>{0, 2, 1, 3};
}
}  // namespace

int fuse_attention_layout(Graph& g) {
  g.reindex();
  std::vector<int> uses = g.use_counts();
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (Node& n : g.nodes) {
    if (n.op != Op::sdpa || n.i("layout", 0) != 0) continue;
    int src[3];
    bool ok = true;
    for (int k = 0; k < 3 && ok; ++k) {
      int p = g.values[size_t(n.inputs[size_t(k)])].producer;
      ok = p >= 0 && swaps_l_and_h(g.nodes[size_t(p)]);
      if (ok) src[k] = g.nodes[size_t(p)].inputs[0];
    }
    int out = n.outputs[0];
    if (!ok || uses[size_t(out)] != 1) continue;
    int back = -1;  // the permute that reads the result
    for (size_t j = 0; j < g.nodes.size(); ++j)
      for (int v : g.nodes[j].inputs)
        if (v == out) back = int(j);
    if (back < 0 || !swaps_l_and_h(g.nodes[size_t(back)])) continue;
    if (!n.i("has_mask", 0)) n.inputs[3] = src[0];  // the unused mask slot must not keep a permute alive
    for (int k = 0; k < 3; ++k) n.inputs[size_t(k)] = src[k];
    n.set_int("layout", 1);
    int back_out = g.nodes[size_t(back)].outputs[0];
    g.values[size_t(out)].type = g.values[size_t(back_out)].type;  // now (B, L, H, Ev)
    replace_all_uses(g, back_out, out);
    dead[size_t(back)] = true;
    ++fused;
  }
  if (fused) erase_nodes(g, dead);
  return fused;
}

}  // namespace zenith
