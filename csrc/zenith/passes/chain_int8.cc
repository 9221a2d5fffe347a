// Int8 activations between int8 convs: a blocked int8 conv (conv2d_nchwc with an int8
// weight) whose output only int8 convs read, each as its input on one and the same static
// scale, writes that output as their codes (y_scale: u8 [N, OH, OW, OC], 1 byte a value
// instead of 4) and they read the codes (x u8, `block` keeping their output's layout):
// no float tensor between them and no quantizer pass in the reader. The codes are those
// the reader would have made from the floats (conv2d_int8.cc), so results do not change.
// A value that anything else reads (a residual, a pooling, a graph output, a float conv)
// stays float32: in ResNet's bottlenecks, the 1x1 -> 3x3 -> 1x1 convs' two inner tensors
// pass as codes, the block's input and output stay float.
// ZENITH_INT8_CHAIN=0 turns it off (read when a graph is compiled). Runs after layout_nchwc.
#include <cstdlib>
#include <string>
#include <vector>

#include "zenith/passes/passes.h"

namespace zenith {

namespace {
bool int8_blocked_conv(const Graph& g, const Node& n) {
  return n.op == Op::conv2d_nchwc && n.inputs.size() > 1 && g.type(n.inputs[1]).dtype == DType::u8;
}
}  // namespace

int chain_int8(Graph& g) {
  const char* env = std::getenv("ZENITH_INT8_CHAIN");
  if (env && std::string(env) == "0") return 0;
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
    const TensorType& t = g.type(v);
    if (graph_output[size_t(v)] || readers[size_t(v)].empty() || t.dtype != DType::f32 || t.rank() != 5) continue;
    bool ok = true;
    double scale = 0;
    for (auto [r, slot] : readers[size_t(v)]) {
      const Node& q = g.nodes[size_t(r)];
      ok = ok && slot == 0 && int8_blocked_conv(g, q) && q.has("x_scale") && !q.i("block", 0) &&
           (scale == 0 || q.f("x_scale") == scale);
      if (ok) scale = q.f("x_scale");
    }
    if (!ok) continue;
    p.set_float("y_scale", scale);
    touched[i] = 1;
    for (auto [r, slot] : readers[size_t(v)]) {
      g.nodes[size_t(r)].set_int("block", t.shape[4].value());
      touched[size_t(r)] = 1;
    }
    ++changed;
  }
  // Types again, in order: a producer's output becomes codes; its readers' outputs keep
  // their types unless they write codes too.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!touched[i]) continue;
    const Node& n = g.nodes[i];
    const std::vector<TensorType> types = op_info(n.op).infer(g, n);
    for (size_t k = 0; k < n.outputs.size(); ++k) g.values[size_t(n.outputs[k])].type = types[k];
  }
  return changed;
}

}  // namespace zenith
