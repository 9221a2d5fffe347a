// Int8 activations between int8 convs: a blocked int8 conv (conv2d_nchwc with an int8
// weight) whose output int8 convs read as their input, all on one and the same static
// scale, writes that output as their codes (y_scale: u8 [N, OH, OW, OC], 1 byte a value
// instead of 4) and they read the codes (x u8, `block` keeping their output's layout), so
// they skip their quantizer pass. The codes are those the reader would have made from the
// floats (conv2d_int8.cc), so its result does not change. Where anything else reads the
// output too (a pooling, a graph output, a float conv), the conv writes both (y_float: the
// float output, then its codes) and the others keep reading the floats.
// An int8 conv reading the value as its residual takes the codes too (r_scale), as ONNX
// Runtime's and PT2E's quantized adds take quantized inputs: its residual is then the
// value rounded to the input readers' scale (up to half a step off, clipped where they
// clip, and an infinity read as NaN: codes have one mark for both). In ResNet's
// bottlenecks every tensor between the stem and the pooling then passes as codes, each
// block's output (the next block's input and residual) included.
// A blocked max pooling between them (ResNet's stem, its pool, the first block's convs)
// passes codes too: where an int8 conv under ReLU or ReLU6 is read only by such pools, and
// their outputs only by int8 convs as their input on one scale, the conv writes codes on
// that scale, the pools become max_pool2d_codes (the max code of each window: after a
// ReLU quantizing is monotone, so the same codes as pooling the floats) and their readers
// take the codes. ResNet-50's stem then writes 1 byte a value where it wrote 4, and its
// pool reads and writes codes.
// ZENITH_INT8_CHAIN=0 turns it off, =exact keeps residuals float (results then unchanged
// bit for bit); read when a graph is compiled. Runs after layout_nchwc.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "zenith/attrs.h"
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
bool int8_blocked_conv(const Graph& g, const Node& n) {
  return n.op == Op::conv2d_nchwc && n.inputs.size() > 1 && g.type(n.inputs[1]).dtype == DType::u8;
}

// An int8 conv's output and input channels (its rows [OC, 4 + C * KH * KW], `kernel`).
int64_t out_channels(const Graph& g, const Node& n) { return g.type(n.inputs[1]).shape[0].value(); }
int64_t in_channels(const Graph& g, const Node& n) {
  std::array<int64_t, 2> k{0, 0};
  if (!const_pair(n, "kernel", 0, k) || k[0] * k[1] <= 0) return -1;
  return (g.type(n.inputs[1]).shape[1].value() - 4) / (k[0] * k[1]);
}

// How int8 conv q reads value v at input `slot`, for a producer of OC channels: as its
// input codes (on its x_scale, over OC channels, not yet reading codes), as its residual
// (unless exact), or neither (anything else, or v read twice).
enum class CodesRead { kNone, kInput, kResidual };
CodesRead codes_read(const Graph& g, const Node& q, int v, int slot, int64_t OC, bool exact) {
  if (!int8_blocked_conv(g, q) || std::count(q.inputs.begin(), q.inputs.end(), v) != 1) return CodesRead::kNone;
  if (slot == 0 && q.has("x_scale") && !q.i("block", 0) && in_channels(g, q) == OC) return CodesRead::kInput;
  if (!exact && slot > 0 && size_t(slot) + 1 == q.inputs.size() && q.i("has_residual", 0) && !q.has("r_scale") &&
      out_channels(g, q) == OC)
    return CodesRead::kResidual;
  return CodesRead::kNone;
}
}  // namespace

int chain_int8(Graph& g) {
  const char* env = std::getenv("ZENITH_INT8_CHAIN");
  if (env && std::string(env) == "0") return 0;
  const bool exact = env && std::string(env) == "exact";
  g.reindex();
  // readers[v]: (node, input slot) of each read of value v
  std::vector<std::vector<std::pair<int, int>>> readers(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t k = 0; k < g.nodes[i].inputs.size(); ++k)
      readers[size_t(g.nodes[i].inputs[k])].push_back({int(i), int(k)});
  std::vector<char> graph_output(g.values.size(), 0);
  for (int v : g.outputs) graph_output[size_t(v)] = 1;
  std::vector<char> touched(g.nodes.size(), 0);
  int changed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& p = g.nodes[i];
    if (!int8_blocked_conv(g, p) || p.has("y_scale")) continue;
    const int v = p.outputs[0];
    const TensorType t = g.type(v);  // a copy: g.values may grow below
    if (readers[size_t(v)].empty() || t.dtype != DType::f32 || t.rank() != 5) continue;
    // The int8 convs reading v as their input on one scale (which sets the codes' scale),
    // and (unless exact) as their residual, each reading nothing else of v, over v's
    // channels (a blocked tensor holds up to L - 1 more: the codes hold only OC).
    const int64_t OC = out_channels(g, p);
    std::vector<std::pair<int, int>> coders;
    bool others = graph_output[size_t(v)] != 0, ok = true;
    double scale = 0;
    for (auto [r, slot] : readers[size_t(v)]) {
      const Node& q = g.nodes[size_t(r)];
      const CodesRead how = codes_read(g, q, v, slot, OC, exact);
      if (how == CodesRead::kNone) {
        others = true;
        continue;
      }
      if (how == CodesRead::kInput) {
        ok = ok && (scale == 0 || q.f("x_scale") == scale);
        scale = q.f("x_scale");
      }
      coders.push_back({r, slot});
    }
    if (!ok || scale == 0) continue;
    p.set_float("y_scale", scale);
    int codes = v;
    if (others) {  // a second output, the codes; v stays the floats
      p.set_int("y_float", 1);
      g.values.push_back({"", TensorType{DType::u8, {}}, int(i)});  // typed below
      codes = int(g.values.size()) - 1;
      p.outputs.push_back(codes);
    }
    touched[i] = 1;
    for (auto [r, slot] : coders) {
      Node& q = g.nodes[size_t(r)];
      q.inputs[size_t(slot)] = codes;
      if (slot == 0)
        q.set_int("block", t.shape[4].value());
      else
        q.set_float("r_scale", scale);
      touched[size_t(r)] = 1;
    }
    ++changed;
  }
  // Pools between int8 convs: a producer p under ReLU (or ReLU6: no -inf, so a window's
  // max code is its max value's code) whose output only blocked max pools read, each
  // pool's output only int8 convs, as their input on one scale (and, unless exact, as
  // their residual). p may read codes itself (a deep stem, VGG's conv -> conv -> pool).
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& p = g.nodes[i];
    if (!int8_blocked_conv(g, p) || p.has("y_scale")) continue;
    const int64_t act = p.i("activation", 0);
    if (act != int64_t(Activation::kRelu) && act != int64_t(Activation::kRelu6)) continue;
    const int v = p.outputs[0];
    const TensorType t = g.type(v);
    if (readers[size_t(v)].empty() || graph_output[size_t(v)] || t.dtype != DType::f32 || t.rank() != 5) continue;
    const int64_t OC = out_channels(g, p);
    std::vector<int> pools;
    std::vector<std::pair<int, int>> coders;
    double scale = 0;
    bool ok = true;
    for (auto [r, slot] : readers[size_t(v)]) {
      const Node& pool = g.nodes[size_t(r)];
      const int w = pool.outputs[0];
      ok = ok && pool.op == Op::max_pool2d_nchwc && !touched[size_t(r)] && !graph_output[size_t(w)] &&
           !readers[size_t(w)].empty();
      if (!ok) break;
      pools.push_back(r);
      for (auto [c, cslot] : readers[size_t(w)]) {
        const Node& q = g.nodes[size_t(c)];
        const CodesRead how = codes_read(g, q, w, cslot, OC, exact);
        const bool input = how == CodesRead::kInput;
        ok = ok && how != CodesRead::kNone && (!input || scale == 0 || q.f("x_scale") == scale);
        if (!ok) break;
        if (input) scale = q.f("x_scale");
        coders.push_back({c, cslot});
      }
    }
    if (!ok || scale == 0) continue;
    p.set_float("y_scale", scale);
    touched[i] = 1;
    for (int r : pools) {
      g.nodes[size_t(r)].op = Op::max_pool2d_codes;
      touched[size_t(r)] = 1;
    }
    for (auto [c, cslot] : coders) {
      Node& q = g.nodes[size_t(c)];
      if (cslot == 0) q.set_int("block", t.shape[4].value());
      else q.set_float("r_scale", scale);
      touched[size_t(c)] = 1;
    }
    ++changed;
  }
  // Types again, in order: a producer's output becomes codes (or gains them); its readers'
  // outputs keep their types unless they write codes too.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!touched[i]) continue;
    const Node& n = g.nodes[i];
    const std::vector<TensorType> types = op_info(n.op).infer(g, n);
    for (size_t k = 0; k < n.outputs.size(); ++k) g.values[size_t(n.outputs[k])].type = types[k];
  }
  return changed;
}

}  // namespace zenith
