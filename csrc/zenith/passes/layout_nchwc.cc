// The blocked channel layout: each float32 conv2d that conv2d_nchwc runs (ungrouped or
// depthwise; see blocked() below), or int8 one (ungrouped), and that reads or feeds another such conv becomes a
// conv2d_nchwc reading and writing [N, ceil(C / L), H, W, L] (L = nchwc_block()), so a
// chain of such convs passes blocked tensors from one to the next (its input and
// residual read through to_nchwc only where their producer is not one of them), and
// from_nchwc converts back only where an NCHW reader remains (an average pooling, a
// graph output); dce drops the conversions nobody reads.
// Where: every such conv, whatever its batch (ZENITH_NCHWC=0: none; read when a graph
// is compiled). A symbolic batch joined in the sixty-fourth session: a model file with
// a symbolic batch on AMD EPYC Zen 4 (family 25 model 17, 2 threads, interleaved in one
// process), blocked against NCHW, ResNet-50 0.92x the time at batch 1 and 0.94x at
// batch 4, MobileNet V2 0.74x and 0.69x (docs/benchmarks, 2026-12-07). Measured on an Intel Xeon (family
// 6 model 167), 2 threads, ResNet-50 end to end, 3 interleaved processes each, after
// Winograd over the blocked layout (vector transforms) and tail tiles for a map's last
// pixels: batch 1 0.80-0.98x the NCHW time (AVX-512) and 0.90-0.94x (AVX2), ResNet-18
// batch 1 0.83-0.96x; batch 8 0.89x (AVX-512) and 0.97x (AVX2) before those two changes,
// which made it 0.77-0.94x / 0.88-0.93x faster again. Depthwise convs joined on an AMD
// EPYC Zen 4 (family 25 model 17, AVX-512): with MobileNet V2's 14 x 14 and 7 x 7 blocks
// blocked end to end, batch 1 0.91x the time and batch 8 0.88x (interleaved in one
// process; docs/benchmarks, 2026-11-28); its larger maps' blocks, blocked too rather than
// fused NCHW (conv2d_pw_dw), 0.96x at batch 1, batch 8 within noise.
// A stem (few input channels) that feeds a chain, a depthwise conv included, reads its
// NCHW image and writes the blocked output itself (conv2d_nchwc with `block`), an int8
// one too (conv2d_int8 quantizing the NCHW image, writing the blocked layout). Measured
// on an AMD EPYC Zen 4 (family 25 model 17), MobileNet V2: see docs/benchmarks
// (2026-11-28, eighteenth session); the int8 stem, ResNet-50: docs/benchmarks
// (2026-12-05, forty-sixth session).
// Convs with an int8 weight (zenith.quantize's) join the chains as conv2d_nchwc over the
// same blocked tensors (conv2d_int8 with a channel block: no transposes into and out of
// its pixel-major codes), so fp32 and int8 convs share a chain. Measured on an AMD EPYC
// Zen 5 (family 26 model 2), ResNet-50 int8-static: see docs/benchmarks (2026-12-01,
// twenty-sixth session).
// A max pooling between them (ResNet's after its stem) runs blocked as well
// (max_pool2d_nchwc); measured on an AMD EPYC Zen 5 (family 26 model 2): see docs/benchmarks
// (2026-12-04, forty-first session).
// Leaves alone: other stems (conv2d's direct path), maps under 16 pixels, convs next to a conv that stays NCHW (a depthwise conv
// with an NCHW neighbour, such as MobileNet V3's squeeze-excitation), Winograd's 3x3 convs
// on channel counts that are not whole blocks, grouped convs other than depthwise, and
// maps of symbolic size. Runs after the epilogue fusions, so the convs carry
// their epilogues, and before fuse_conv_pw_dw, which fuses the MobileNet blocks (blocked or NCHW).
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "zenith/kernels/kernels.h"
#include "zenith/passes/passes.h"

namespace zenith {

namespace {
constexpr int64_t kMinChannels = 16;
constexpr int64_t kMinPixels = 16;

// ZENITH_NCHWC=0 turns the layout off (for comparisons); any other value, or none, on.
bool nchwc_off() {
  const char* v = std::getenv("ZENITH_NCHWC");
  return v && std::string(v) == "0";
}

// A depthwise conv2d: groups == C == OC, filters [C, 1, KH, KW].
bool depthwise(const Graph& g, const Node& n) {
  const TensorType &x = g.type(n.inputs[0]), &w = g.type(n.inputs[1]);
  const int64_t groups = n.i("groups", 1);
  return n.op == Op::conv2d && groups > 1 && x.rank() == 4 && x.shape[1].is_const() &&
         x.shape[1].value() == groups && w.rank() == 4 && w.is_static() && w.shape[0].value() == groups &&
         w.shape[1].value() == 1;
}

// A conv2d with an int8 weight (u8 rows; one group, a float32 input: infer_conv2d checks).
bool int8_conv(const Graph& g, const Node& n) {
  return n.op == Op::conv2d && n.inputs.size() > 1 && g.type(n.inputs[1]).dtype == DType::u8;
}

// A float32 conv2d, or an int8 one, of static geometry (any batch) whose output map
// holds a tile's pixels: the convs conv2d_nchwc may run.
bool static_conv(const Graph& g, const Node& n) {
  if (n.op != Op::conv2d) return false;
  if (!int8_conv(g, n)) {
    if (n.has("x_scale") || n.has("kernel")) return false;
    for (int v : n.inputs)
      if (g.type(v).dtype != DType::f32) return false;
  }
  const TensorType &x = g.type(n.inputs[0]), &w = g.type(n.inputs[1]);
  if (x.rank() != 4 || w.rank() != (int8_conv(g, n) ? 2 : 4) || !x.shape[1].is_const() || !x.shape[2].is_const() ||
      !x.shape[3].is_const())
    return false;
  std::array<int64_t, 2> st, pd, dl;
  if (!const_pair(n, "stride", 1, st) || !const_pair(n, "padding", 0, pd) || !const_pair(n, "dilation", 1, dl))
    return false;
  // Maps of fewer pixels than a tile (squeeze-excitation convs on 1 x 1) waste most of it.
  const TensorType& o = g.type(n.outputs[0]);
  return o.shape[2].is_const() && o.shape[3].is_const() && o.shape[2].value() * o.shape[3].value() >= kMinPixels;
}

bool blocked(const Graph& g, const Node& n) {
  if (!static_conv(g, n) || (n.i("groups", 1) != 1 && !depthwise(g, n))) return false;
  const TensorType &x = g.type(n.inputs[0]), &w = g.type(n.inputs[1]);
  // An int8 conv: conv2d_int8 over the blocked layout (no Winograd).
  if (int8_conv(g, n)) return x.shape[1].value() >= kMinChannels;
  std::array<int64_t, 2> st, pd, dl;
  const_pair(n, "stride", 1, st), const_pair(n, "padding", 0, pd), const_pair(n, "dilation", 1, dl);
  const int64_t C = x.shape[1].value(), OC = w.shape[0].value(), L = nchwc_block();
  if (depthwise(g, n)) return C >= kMinChannels;
  // Winograd's convs join on whole channel blocks only (conv2d_nchwc runs them as Winograd).
  return C >= kMinChannels && (!conv2d_uses_winograd(1, w.shape[2].value(), w.shape[3].value(), st, pd, dl, C,
                                                     x.shape[2].value(), x.shape[3].value(), OC) ||
                               (C % L == 0 && OC % L == 0));
}
}  // namespace

int layout_nchwc(Graph& g) {
  if (nchwc_off()) return 0;
  // Candidates, then those in a chain: a candidate's input or residual is another's
  // output. A lone conv between NCHW ops (a training graph's conv -> batch_norm) would
  // only pay the conversions both ways.
  g.reindex();
  std::vector<char> cand(g.nodes.size(), 0), chained(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) cand[i] = blocked(g, g.nodes[i]);
  // Nor a conv next to a conv that stays NCHW (a depthwise conv reading its output or
  // writing its input): the conversion would move the block's largest
  // tensor (MobileNet V3 batch 8: 2.9 ms of conversions in a 30 ms call), and the chain
  // gives way in turn. (A conv2d_pw_dw counts as one, should this pass run after
  // fuse_conv_pw_dw; the pipeline runs it before.)
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs) readers[size_t(v)].push_back(int(i));
  std::vector<char> graph_output(g.values.size(), 0);
  for (int v : g.outputs) graph_output[size_t(v)] = 1;
  // (A stem, few channels in, may feed the chain: its output is small against the work
  // of the convs after it.)
  auto stem = [&](int i) {
    const Node& n = g.nodes[size_t(i)];
    if (n.op != Op::conv2d) return false;  // (before reading an input: a constant has none)
    const TensorType& x = g.type(n.inputs[0]);
    return x.rank() == 4 && x.shape[1].is_const() && x.shape[1].value() < kMinChannels;
  };
  auto nchw_conv = [&](int i) {  // (a conv2d_pw_dw over a blocked input is one of the blocked convs)
    const Node& n = g.nodes[size_t(i)];
    return (n.op == Op::conv2d_pw_dw && g.type(n.inputs[0]).rank() == 4) ||
           (n.op == Op::conv2d && !cand[size_t(i)] && !stem(i));
  };
  // A depthwise conv is blocked only between blocked convs: its input's producer (or a
  // stem) and every reader of its output among them. Its tensors are its block's widest,
  // and an NCHW neighbour (MobileNet V3's squeeze-excitation reading it) would convert
  // them.
  auto lone_depthwise = [&](size_t i) {
    const Node& n = g.nodes[i];
    if (!depthwise(g, n)) return false;
    std::vector<int> reads = {n.inputs[0]};
    if (n.i("has_residual", 0)) reads.push_back(n.inputs.back());
    for (int v : reads) {
      const int p = g.values[size_t(v)].producer;
      if (p < 0 || (!cand[size_t(p)] && !stem(p))) return true;
    }
    const int o = n.outputs[0];
    if (graph_output[size_t(o)] || readers[size_t(o)].empty()) return true;
    for (int r : readers[size_t(o)])
      if (!cand[size_t(r)]) return true;
    return false;
  };
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!cand[i]) continue;
      bool next_to_nchw = lone_depthwise(i);
      for (int v : g.nodes[i].inputs) {
        const int p = g.values[size_t(v)].producer;
        next_to_nchw = next_to_nchw || (p >= 0 && nchw_conv(p));
      }
      for (int r : readers[size_t(g.nodes[i].outputs[0])]) next_to_nchw = next_to_nchw || nchw_conv(r);
      if (next_to_nchw) cand[i] = 0, again = true;
    }
  }
  // A max pooling that can run blocked (max_pool2d_nchwc): static (any batch), float32, and every
  // window holding a tap of the image, since one wholly in the padding would write -inf
  // into the zero channels past C and the next conv would multiply them by its zero
  // filter rows (NaN). Undilated suffices: max_pool2d's own rule (infer_pool) keeps the
  // padding within half the window, and ceil mode's last window starts inside the input.
  // It passes a chain through: a conv reading it chains with the conv it pools.
  auto pool_ok = [&](int i) {
    const Node& n = g.nodes[size_t(i)];
    if (n.op != Op::max_pool2d) return false;
    const TensorType& x = g.type(n.inputs[0]);
    std::array<int64_t, 2> dl;
    return x.rank() == 4 && x.dtype == DType::f32 && x.shape[1].is_const() && x.shape[2].is_const() &&
           x.shape[3].is_const() && const_pair(n, "dilation", 1, dl) &&
           dl[0] == 1 && dl[1] == 1;
  };
  auto through_pool = [&](int p) {  // the producer of a blockable pool's input, else p
    return p >= 0 && pool_ok(p) ? g.values[size_t(g.nodes[size_t(p)].inputs[0])].producer : p;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!cand[i]) continue;
    const Node& n = g.nodes[i];
    std::vector<int> reads = {n.inputs[0]};
    if (n.i("has_residual", 0)) reads.push_back(n.inputs.back());
    for (int v : reads) {
      const int p = through_pool(g.values[size_t(v)].producer);
      if (p >= 0 && cand[size_t(p)]) chained[i] = chained[size_t(p)] = 1;
    }
  }
  // A stem (few channels in, groups 1) that a chained conv reads becomes a conv2d_nchwc
  // over its NCHW input (`block`), writing the blocked output itself: no to_nchwc of its
  // output, and no image padded to a block of channels.
  auto stem_ok = [&](size_t i) {
    const Node& n = g.nodes[i];
    return !cand[i] && stem(int(i)) && n.i("groups", 1) == 1 && !n.i("has_residual", 0) && static_conv(g, n);
  };
  // Such a pool between a chained conv or such a stem and a chained conv (ResNet's stem ->
  // max_pool2d -> layer 1) runs blocked: no NCHW pooling, and no to_nchwc after it.
  std::vector<char> pool_in(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!pool_ok(int(i))) continue;
    const int p = g.values[size_t(g.nodes[i].inputs[0])].producer;
    if (p < 0 || !(chained[size_t(p)] || stem_ok(size_t(p)))) continue;
    for (int r : readers[size_t(g.nodes[i].outputs[0])]) pool_in[i] = pool_in[i] || chained[size_t(r)];
  }
  std::vector<char> stem_in(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!stem_ok(i)) continue;
    for (int r : readers[size_t(g.nodes[i].outputs[0])])
      stem_in[i] = stem_in[i] || chained[size_t(r)] || pool_in[size_t(r)];
  }
  bool any = false;
  for (char c : chained) any = any || c;
  if (!any) return 0;
  const int64_t L = nchwc_block();
  std::vector<Node> old = std::move(g.nodes);
  g.nodes.clear();
  std::unordered_map<int, int> rename;      // an old conv's NCHW output -> its from_nchwc
  std::unordered_map<int, int> blocked_of;  // an NCHW value -> the same values blocked
  auto to_blocked = [&](int v) {
    auto it = blocked_of.find(v);
    if (it != blocked_of.end()) return it->second;
    Node attrs;
    attrs.set_int("block", L);
    const int b = g.add_node(Op::to_nchwc, {v}, attrs.attrs)[0];
    blocked_of[v] = b;
    return b;
  };
  int changed = 0;
  for (size_t i = 0; i < old.size(); ++i) {
    Node& n = old[i];
    for (int& v : n.inputs) {
      auto it = rename.find(v);
      if (it != rename.end()) v = it->second;
    }
    if (!chained[i] && !stem_in[i] && !pool_in[i]) {
      g.nodes.push_back(std::move(n));
      continue;
    }
    std::vector<int> inputs = n.inputs;
    if (stem_in[i]) {
      n.set_int("block", L);
    } else {
      inputs[0] = to_blocked(inputs[0]);
      if (n.i("has_residual", 0)) inputs.back() = to_blocked(inputs.back());
    }
    const int ob = g.add_node(pool_in[i] ? Op::max_pool2d_nchwc : Op::conv2d_nchwc, inputs, n.attrs)[0];
    Node back;
    back.set_int("channels", g.type(n.outputs[0]).shape[1].value());
    const int nchw = g.add_node(Op::from_nchwc, {ob}, back.attrs)[0];
    rename[n.outputs[0]] = nchw;
    blocked_of[nchw] = ob;
    ++changed;
  }
  for (int& v : g.outputs) {
    auto it = rename.find(v);
    if (it != rename.end()) v = it->second;
  }
  g.reindex();
  return changed;
}

}  // namespace zenith
