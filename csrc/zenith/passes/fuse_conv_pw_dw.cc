// Inverted-residual fusion: a 1x1 conv2d (stride 1, no padding, one group) whose output
// only a depthwise conv2d reads becomes, with that conv, one conv2d_pw_dw node, whose
// kernel computes the expanded tensor a window of rows at a time for the depthwise
// conv's bands (MobileNet V2's inverted residual blocks: the expanded tensor, the
// block's largest, never reaches memory). Then a 1x1 conv2d whose input only such a node
// reads (the block's projection, with its residual add when fuse_conv_residual gave it
// one) joins it as its `project` part, so the depthwise output, as large, never reaches
// memory either; so does one whose input only a depthwise conv2d without an expand reads
// (expand=0: MobileNet V2's first block). Each conv keeps its own epilogue (bias, batch-norm, activation): runs
// after fuse_conv_bn, fuse_conv_residual and fuse_epilogue, and after layout_nchwc: the
// blocks it made blocked (conv2d_nchwc over a blocked input) fuse as blocked
// conv2d_pw_dw nodes (conv2d_pw_dw_nchwc), the blocks it left NCHW (ZENITH_NCHWC=0; a
// squeeze-excitation) as NCHW ones. Blocked, MobileNet V2 on Zen 4 (family 25 model 17,
// 2 threads, interleaved in one process): batch 8 34.5 against 38.2 ms unfused, batch 1
// 6.04 against 6.05; maps from 56 x 56 only, batch 8 34.8 (docs/benchmarks, 2026-11-28,
// twentieth session).
// Leaves alone: maps under 28 x 28 or of symbolic size, a symbolic batch aside (the expanded tensor of a small
// map stays in cache anyway), expand and depthwise convs with a fused residual, padding
// at least the depthwise window's reach, and non-float32 convs.
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
constexpr int64_t kMinPixels = 28 * 28;

bool all_f32(const Graph& g, const Node& n) {
  for (int v : n.inputs)
    if (g.type(v).dtype != DType::f32) return false;
  return g.type(n.outputs[0]).dtype == DType::f32;
}

// A conv2d, or a conv2d_nchwc over a blocked input (not a stem's NCHW image).
bool conv(const Node& n) { return n.op == Op::conv2d || (n.op == Op::conv2d_nchwc && n.i("block", 0) == 0); }

// The 1x1, stride-1, unpadded, ungrouped conv of float32 values (without a residual
// unless `residual_ok`).
bool pointwise(const Graph& g, const Node& n, bool residual_ok) {
  if (!conv(n) || n.i("groups", 1) != 1 || (!residual_ok && n.i("has_residual", 0)) || !all_f32(g, n))
    return false;
  const Shape& w = g.type(n.inputs[1]).shape;  // static: infer_conv2d requires it
  std::array<int64_t, 2> st, pd, dl;
  return w[2].value() == 1 && w[3].value() == 1 && const_pair(n, "stride", 1, st) && st[0] == 1 && st[1] == 1 &&
         const_pair(n, "padding", 0, pd) && pd[0] == 0 && pd[1] == 0 && const_pair(n, "dilation", 1, dl) &&
         dl[0] == 1 && dl[1] == 1;
}

// The depthwise conv2d of float32 values over a static map of at least kMinPixels (any batch),
// without a residual, its padding inside the window's reach.
bool depthwise(const Graph& g, const Node& n) {
  if (!conv(n) || n.i("has_residual", 0) || !all_f32(g, n)) return false;
  for (size_t d = 1; d < g.type(n.inputs[0]).shape.size(); ++d)  // (a symbolic batch is fine)
    if (!g.type(n.inputs[0]).shape[d].is_const()) return false;
  const Shape &x = g.type(n.inputs[0]).shape, &w = g.type(n.inputs[1]).shape;
  const int64_t C = w[0].value();  // (a blocked input's blocks hold C: infer_conv2d_nchwc checks)
  std::array<int64_t, 2> pd, dl;
  if (n.i("groups", 1) != C || C < 2 || (n.op == Op::conv2d && x[1].value() != C) || w[1].value() != 1 ||
      x[2].value() * x[3].value() < kMinPixels ||
      !const_pair(n, "padding", 0, pd) || !const_pair(n, "dilation", 1, dl))
    return false;
  return pd[0] < (w[2].value() - 1) * dl[0] + 1 && pd[1] < (w[3].value() - 1) * dl[1] + 1;
}
// A conv's epilogue attributes (bias, batch-norm, activation) copied into `attrs` under
// `prefix` (pw_ for the expand, pj_ for the projection).
void copy_epilogue(const Node& conv, const char* prefix, std::map<std::string, Attr>& attrs) {
  for (const char* key : {"has_bias", "bn_eps", "activation"}) {
    auto it = conv.attrs.find(key);
    if (it != conv.attrs.end()) attrs[std::string(prefix) + key] = it->second;
  }
}
}  // namespace

int fuse_conv_pw_dw(Graph& g) {
  g.reindex();
  std::vector<int> uses = g.use_counts();
  std::vector<bool> absorbed(g.nodes.size(), false);
  int fused = 0;
  for (Node& dw : g.nodes) {
    if (!depthwise(g, dw)) continue;
    const int x = dw.inputs[0], p = g.values[size_t(x)].producer;
    if (p < 0 || uses[size_t(x)] != 1 || !pointwise(g, g.nodes[size_t(p)], false)) continue;
    const Node& pw = g.nodes[size_t(p)];
    if (pw.op != dw.op) continue;  // (a blocked conv's input is blocked: it cannot be)
    std::vector<int> inputs = pw.inputs;
    inputs.insert(inputs.end(), dw.inputs.begin() + 1, dw.inputs.end());
    dw.op = Op::conv2d_pw_dw;
    dw.inputs = std::move(inputs);
    for (const char* key : {"groups", "has_residual", "block"}) dw.attrs.erase(key);
    copy_epilogue(pw, "pw_", dw.attrs);
    absorbed[size_t(p)] = true;
    ++fused;
  }
  if (fused) erase_nodes(g, absorbed);
  // The projections: pj (x = the conv2d_pw_dw's output, read by pj alone) becomes the
  // fused node, at pj's place in the order (its residual is computed before it).
  // Counted afresh: erase_nodes renumbered the nodes.
  uses = g.use_counts();
  absorbed.assign(g.nodes.size(), false);
  int projected = 0;
  for (Node& pj : g.nodes) {
    if (!pointwise(g, pj, true)) continue;
    const int x = pj.inputs[0], p = g.values[size_t(x)].producer;
    if (p < 0 || uses[size_t(x)] != 1) continue;
    const Node& blk = g.nodes[size_t(p)];
    // An expand + depthwise node, or a depthwise conv that had no expand to join (MobileNet
    // V2's first block): that one's inputs and attributes are the depthwise conv's.
    const bool lone = depthwise(g, blk);
    if (!lone && (blk.op != Op::conv2d_pw_dw || blk.i("project", 0))) continue;
    // Both blocked or both NCHW (as they are, the one reading the other's output).
    if ((g.type(blk.inputs[0]).rank() == 5) != (pj.op == Op::conv2d_nchwc)) continue;
    std::vector<int> inputs = blk.inputs;
    inputs.insert(inputs.end(), pj.inputs.begin() + 1, pj.inputs.end());
    auto attrs = blk.attrs;
    if (lone)
      for (const char* key : {"groups", "has_residual", "block"}) attrs.erase(key);  // (depthwise() took no residual)
    copy_epilogue(pj, "pj_", attrs);
    auto it = pj.attrs.find("has_residual");
    if (it != pj.attrs.end()) attrs["has_residual"] = it->second;
    pj.op = Op::conv2d_pw_dw;
    pj.inputs = std::move(inputs);
    pj.attrs = std::move(attrs);
    pj.set_int("project", 1);
    if (lone) pj.set_int("expand", 0);
    absorbed[size_t(p)] = true;
    ++projected;
  }
  if (projected) erase_nodes(g, absorbed);
  return fused + projected;
}

}  // namespace zenith
