// Batch slices (batch_slices.{h,cc} and their part in the planner and the runtime): which
// runs the rule slices and how many images a pass takes; random graphs of per-image ops
// whose memory plans are run pass by pass on paper (every byte tagged with the value and
// image written there); and the runtime's results with slices against the same graph
// unsliced and, bit for bit, against each pass's images run alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "zenith/batch_slices.h"
#include "zenith/error.h"
#include "zenith/ir.h"
#include "zenith/passes/passes.h"
#include "zenith/planner.h"
#include "zenith/runtime.h"
#include "zenith/threadpool.h"
#include "test_util.h"

using namespace zenith;

namespace {

size_t bytes_of(const Graph& g, int v) {
  return size_t(g.type(v).static_numel()) * dtype_size(g.type(v).dtype);
}

// ZENITH_BATCH_SLICE_CACHE for a scope: the runtime reads it when it builds a plan.
struct SliceCache {
  explicit SliceCache(size_t bytes) { setenv("ZENITH_BATCH_SLICE_CACHE", std::to_string(bytes).c_str(), 1); }
  ~SliceCache() { unsetenv("ZENITH_BATCH_SLICE_CACHE"); }
};

TensorType f32(std::vector<int64_t> dims) {
  TensorType t;
  for (int64_t d : dims) t.shape.push_back(SymInt(d));
  return t;
}

std::map<std::string, Attr> conv_attrs(int64_t k, int64_t stride, bool residual, int64_t block = 0) {
  Node a;
  a.set_ints("stride", {SymInt(stride), SymInt(stride)});
  a.set_ints("padding", {SymInt(k / 2), SymInt(k / 2)});
  a.set_ints("dilation", {SymInt(1), SymInt(1)});
  a.set_int("has_bias", 1);
  a.set_int("has_residual", residual ? 1 : 0);
  a.set_int("activation", 1);  // ReLU
  if (block) a.set_int("block", block);
  return a.attrs;
}

// A random graph of images [N, C, H, W]: 1x1 and 3x3 convs (stride 1 or 2), some with a
// residual (an earlier value of the output's shape, made before or inside the run),
// 2 x 2 max pools, blocked stretches (to_nchwc, conv2d_nchwc, max_pool2d_nchwc,
// from_nchwc), now and then a ReLU (not per image: it ends a run), a value returned, or
// a fill that nothing reads. The filters are graph inputs.
Graph random_image_graph(std::mt19937& rng, int64_t N) {
  auto pick = [&](int n) { return int(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  Graph g;
  int64_t C = 1 + pick(6), H = 6 + pick(9);
  int x = g.add_input("x", f32({N, C, H, H}));
  int inputs = 0;
  auto weight = [&](std::vector<int64_t> dims) { return g.add_input("w" + std::to_string(inputs++), f32(dims)); };
  std::vector<int> plain{x}, blocked;  // values of each layout so far
  int cur = x;
  bool is_blocked = false;
  const int steps = 4 + pick(10);
  for (int s = 0; s < steps; ++s) {
    const auto& shape = g.type(cur).shape;
    const int64_t c = is_blocked ? shape[1].value() * shape[4].value() : shape[1].value(), h = shape[2].value();
    const int kind = pick(10);
    if (kind < 5) {  // a conv
      const int64_t oc = 1 + pick(12), k = pick(2) ? 3 : 1, stride = h >= 4 && pick(4) == 0 ? 2 : 1;
      const int64_t oh = (h + 2 * (k / 2) - k) / stride + 1;
      std::vector<int> ins{cur, weight({oc, c, k, k}), weight({oc})};
      // Blocked output: its channel blocks of 8.
      std::vector<int64_t> out = is_blocked ? std::vector<int64_t>{N, (oc + 7) / 8, oh, oh, 8}
                                            : std::vector<int64_t>{N, oc, oh, oh};
      std::vector<int> same;
      for (int v : is_blocked ? blocked : plain) {
        std::vector<int64_t> d;
        for (const auto& e : g.type(v).shape) d.push_back(e.value());
        if (d == out) same.push_back(v);
      }
      const bool residual = !same.empty() && pick(2);
      if (residual) ins.push_back(same[size_t(pick(int(same.size())))]);
      cur = g.add_node(is_blocked ? Op::conv2d_nchwc : Op::conv2d, ins, conv_attrs(k, stride, residual))[0];
    } else if (kind < 7 && h >= 2) {  // a 2 x 2 max pool
      Node a;
      a.set_ints("kernel", {SymInt(2), SymInt(2)});
      a.set_ints("stride", {SymInt(2), SymInt(2)});
      a.set_ints("padding", {SymInt(0), SymInt(0)});
      cur = g.add_node(is_blocked ? Op::max_pool2d_nchwc : Op::max_pool2d, {cur}, a.attrs)[0];
    } else if (kind < 9) {  // into or out of the blocked layout
      Node a;
      if (is_blocked) a.set_int("channels", c - pick(int(std::min<int64_t>(c, 8))));  // c: the blocks' floats
      else a.set_int("block", 8);
      cur = g.add_node(is_blocked ? Op::from_nchwc : Op::to_nchwc, {cur}, a.attrs)[0];
      is_blocked = !is_blocked;
    } else {
      cur = g.add_node(Op::relu, {cur})[0];
    }
    (is_blocked ? blocked : plain).push_back(cur);
    if (pick(6) == 0) g.outputs.push_back(cur);
    if (pick(8) == 0) {  // a fill among the images' nodes (a run skips over it), read by nothing
      Node a;
      a.set_ints("shape", {SymInt(3), SymInt(1 + pick(40))});
      a.set_float("value", 0.5);
      a.set_int("dtype", int(DType::f32));
      g.add_node(Op::full, {}, a.attrs);
    }
  }
  g.outputs.push_back(cur);
  return g;
}

// Runs a plan with slices on paper: each byte of the arena and of the output buffers
// carries (value, image) of its last write. A node in a slice writes and reads, on pass
// k, the images of pass k of its batched operands (a per-pass storage holds only
// those); any other node all of them. Every read checks that its bytes still hold what
// was written, and at the end every output holds all its images. (A fill in a slice,
// not per image, writes all of its output on every pass.)
void simulate_passes(const Graph& g, const MemoryPlan& plan, const std::vector<BatchSlice>& slices) {
  const auto& st = plan.storages;
  std::vector<int64_t> arena(plan.arena_bytes, -1);
  std::vector<std::vector<int64_t>> buffers(size_t(plan.num_output_buffers));
  for (const Storage& s : st)
    if (s.kind == Storage::kOutput) buffers[size_t(s.index)].assign(s.bytes, -1);
  auto storage = [&](int v) -> const Storage& { return st[size_t(plan.storage_of[size_t(v)])]; };
  auto external = [&](int v) { return storage(v).kind == Storage::kInput || storage(v).kind == Storage::kConst; };
  auto mem = [&](int v) -> int64_t* {
    const Storage& s = storage(v);
    return s.kind == Storage::kArena ? arena.data() + s.offset : buffers[size_t(s.index)].data();
  };
  const int64_t kImages = 1 << 16;
  // The bytes of images [i0, i1) of v: (first byte, image bytes) in its storage.
  auto span = [&](int v, int64_t i0, int64_t i1, int64_t* first, int64_t* image_bytes) {
    const int64_t n = g.type(v).shape[0].value();
    *image_bytes = int64_t(bytes_of(g, v)) / n;
    *first = storage(v).per_pass ? 0 : i0 * *image_bytes;
    ASSERT_LE(*first + (i1 - i0) * *image_bytes, int64_t(storage(v).bytes)) << "%" << g.value_name(v);
  };
  auto access = [&](int v, int64_t i0, int64_t i1, bool write, const std::string& what) {
    if (external(v)) {
      ASSERT_FALSE(write) << what << " writes into an input";
      return;
    }
    int64_t first = 0, image = 0;
    span(v, i0, i1, &first, &image);
    int64_t* p = mem(v) + first;
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t b = 0; b < image; ++b) {
        const int64_t tag = int64_t(v) * kImages + i;
        if (write) p[(i - i0) * image + b] = tag;
        else ASSERT_EQ(p[(i - i0) * image + b], tag) << what << " reads %" << g.value_name(v) << " image " << i
                                                     << " overwritten";
      }
  };
  std::vector<const BatchSlice*> slice_of(g.nodes.size(), nullptr);
  for (const BatchSlice& r : slices)
    for (int ni = r.first; ni <= r.last; ++ni) slice_of[size_t(ni)] = &r;
  auto run = [&](size_t ni, int64_t i0, int64_t i1) {
    const Node& n = g.nodes[ni];
    std::vector<bool> b(n.inputs.size(), false);
    const BatchSlice* r = slice_of[ni] && per_image_node(n, &b) ? slice_of[ni] : nullptr;
    const std::string what = "node " + std::to_string(ni) + " (" + op_info(n.op).name + ")";
    auto images = [&](int v, bool batched) { return batched ? std::pair{i0, i1} : std::pair{int64_t(0), g.type(v).shape[0].value()}; };
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      auto [a, e] = images(n.inputs[k], b[k]);
      access(n.inputs[k], a, e, false, what);
    }
    for (int o : n.outputs) {
      auto [a, e] = images(o, r != nullptr);
      access(o, a, e, true, what);
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {  // a node never writes over its inputs
      auto [a, e] = images(n.inputs[k], b[k]);
      access(n.inputs[k], a, e, false, what + " (after its write)");
    }
  };
  size_t ni = 0;
  for (const BatchSlice& r : slices) {
    for (; ni < size_t(r.first); ++ni) run(ni, 0, g.type(g.nodes[ni].outputs[0]).shape[0].value());
    for (int64_t k = 0; k < r.batch / r.slice; ++k)
      for (ni = size_t(r.first); ni <= size_t(r.last); ++ni) run(ni, k * r.slice, (k + 1) * r.slice);
  }
  for (; ni < g.nodes.size(); ++ni) run(ni, 0, g.type(g.nodes[ni].outputs[0]).shape[0].value());
  for (int v : g.outputs) access(v, 0, g.type(v).shape[0].value(), false, "the end");
}


// Inputs for a graph: float inputs random (input 0, the images, with image 1 scaled by
// `big_image` when it is not 0), u8 inputs int8 filter rows (an f32 scale, then codes).
struct Inputs {
  std::vector<std::vector<float>> f;
  std::vector<std::vector<uint8_t>> u;
  std::vector<InTensor> in;
  Inputs(const Graph& g, unsigned seed, float big_image = 0) {
    f.reserve(g.inputs.size());
    u.reserve(g.inputs.size());
    std::mt19937 rng(seed);
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const auto& t = g.type(g.inputs[i]);
      std::vector<int64_t> dims;
      for (const auto& d : t.shape) dims.push_back(d.value());
      if (t.dtype == DType::u8) {
        std::uniform_real_distribution<float> mag(1e-3f, 5e-2f);
        const int64_t K = dims[1] - 4;
        u.emplace_back(size_t(dims[0] * dims[1]));
        for (int64_t r = 0; r < dims[0]; ++r) {
          const float sc = mag(rng);
          std::memcpy(&u.back()[size_t(r * dims[1])], &sc, 4);
          for (int64_t k = 0; k < K; ++k) u.back()[size_t(r * dims[1] + 4 + k)] = uint8_t(int8_t(int(rng() % 255) - 127));
        }
        in.push_back({u.back().data(), DType::u8, dims});
      } else {
        f.push_back(randn(size_t(t.static_numel()), seed + unsigned(i)));
        if (i == 0 && big_image != 0)
          for (size_t k = f.back().size() / size_t(dims[0]); k < 2 * f.back().size() / size_t(dims[0]); ++k)
            f.back()[k] *= big_image;
        in.push_back({f.back().data(), DType::f32, dims});
      }
    }
  }
};

void expect_same(const Graph& g, const std::vector<OutTensor>& a, const std::vector<OutTensor>& b, float tol,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t o = 0; o < a.size(); ++o) {
    const size_t n = size_t(g.type(g.outputs[o]).static_numel());
    if (a[o].dtype != DType::f32) {
      ASSERT_EQ(std::memcmp(a[o].data, b[o].data, n * dtype_size(a[o].dtype)), 0) << what << " output " << o;
      continue;
    }
    const float* pa = static_cast<const float*>(a[o].data);
    const float* pb = static_cast<const float*>(b[o].data);
    for (size_t i = 0; i < n; ++i) {
      if (tol == 0) ASSERT_EQ(pa[i], pb[i]) << what << " output " << o << " at " << i;
      else ASSERT_NEAR(pa[i], pb[i], tol * (1 + std::fabs(pb[i]))) << what << " output " << o << " at " << i;
    }
  }
}

// The graph sliced at every cache size that slices it differently (64 B to 64 MiB)
// against it unsliced: filters read in place or packed (every input but the first
// constant), 1 and 2 threads, each executable called twice (and with 1 thread, then
// from two threads at once). tol 0: bit for bit.
void expect_slices_change_nothing(const Graph& g, float tol, float big_image = 0) {
  const auto shapes = static_shapes(g);
  std::vector<int> weights;
  for (size_t i = 1; i < g.inputs.size(); ++i) weights.push_back(int(i));
  const Inputs in(g, 17, big_image);
  std::set<std::string> seen;
  int tried = 0;
  for (size_t cache = 64; cache <= (size_t(64) << 20); cache *= 2) {
    const auto s = find_batch_slices(g, shapes, cache);
    std::string key;
    for (const BatchSlice& r : s) key += std::to_string(r.first) + "-" + std::to_string(r.last) + "/" + std::to_string(r.slice) + " ";
    if (s.empty() || !seen.insert(key).second) continue;
    ++tried;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (bool packed : {false, true}) {
        const std::string what = "cache " + std::to_string(cache) + " (" + key + "), threads " +
                                 std::to_string(threads) + (packed ? ", packed" : "");
        std::vector<OutTensor> whole;
        {
          SliceCache off(0);
          Executable x(g);
          if (packed) x.set_constant_inputs(weights);
          whole = x.run(in.in, {});
        }
        SliceCache on(cache);
        Executable x(g);
        if (packed) x.set_constant_inputs(weights);
        for (int rep = 0; rep < 2; ++rep) expect_same(g, x.run(in.in, {}), whole, tol, what);
        // Two calls at once, one thread each: with 2, each std::thread would start an
        // OpenMP team of its own whose workers outlive it, and their thread-local
        // kernel buffers show as leaks under LeakSanitizer.
        if (threads == 1) {
          std::vector<OutTensor> r1, r2;
          std::thread t1([&] { r1 = x.run(in.in, {}); });
          std::thread t2([&] { r2 = x.run(in.in, {}); });
          t1.join();
          t2.join();
          expect_same(g, r1, whole, tol, what + ", concurrent");
          expect_same(g, r2, whole, tol, what + ", concurrent");
        }
        if (::testing::Test::HasFailure()) {
          set_num_threads(1);
          return;
        }
      }
    }
  }
  set_num_threads(1);
  EXPECT_GT(tried, 0) << "no cache size slices the graph";
}

std::string rebatch(std::string text, int64_t from, int64_t to) {
  const std::string a = "f32[" + std::to_string(from) + ", ", b = "f32[" + std::to_string(to) + ", ";
  for (size_t p = text.find(a); p != std::string::npos; p = text.find(a, p + b.size())) text.replace(p, a.size(), b);
  return text;
}


}  // namespace

// The rule: the run's nodes with an operand over a quarter of the cache and filters
// that add at most a quarter of their operands' bytes read once an image, the most
// images a pass whose operands of those nodes fit in a quarter of the cache.
TEST(BatchSlices, RuleTakesTheNodesWhoseTensorsOutgrowTheCache) {
  const int64_t N = 8;
  // Node 1's filters: 48 -> 16 channels (27 KiB), or 48 -> 512 (864 KiB).
  for (int64_t oc : {16, 512}) {
    Graph g;
    int x = g.add_input("x", f32({N, 3, 32, 32}));                                  // 96 KiB
    int w0 = g.add_input("w0", f32({48, 3, 1, 1})), b0 = g.add_input("b0", f32({48}));
    int w1 = g.add_input("w1", f32({oc, 48, 3, 3})), b1 = g.add_input("b1", f32({oc}));
    int a = g.add_node(Op::conv2d, {x, w0, b0}, conv_attrs(1, 1, false))[0];  // 0: [8, 48, 32, 32] 1.5 MiB
    int c = g.add_node(Op::conv2d, {a, w1, b1}, conv_attrs(3, 2, false))[0];  // 1: [8, oc, 16, 16]
    g.outputs = {g.add_node(Op::relu, {c})[0]};                               // 2: not per image
    verify(g);
    const auto shapes = static_shapes(g);
    SCOPED_TRACE(oc);
    // Per image, node 0's operands take 204 KiB and node 1's 208 KiB (with 16 channels).
    // Its 864 KiB of filters read 7 times more would add 5.9 MiB to its 5.5 MiB of
    // operands: not worth it, so the slice is node 0 alone.
    auto s = find_batch_slices(g, shapes, size_t(2) << 20);  // a quarter 512 KiB: 2 images
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].first, 0);
    EXPECT_EQ(s[0].last, oc == 16 ? 1 : 0);
    EXPECT_EQ(s[0].batch, N);
    EXPECT_EQ(s[0].slice, 2);
    s = find_batch_slices(g, shapes, size_t(1) << 20);  // a quarter 256 KiB: one image
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].slice, 1);
    EXPECT_TRUE(find_batch_slices(g, shapes, size_t(6) << 20).empty());  // 1.5 MiB is a quarter: not over
    EXPECT_TRUE(find_batch_slices(g, shapes, 0).empty());
  }
}

// A conv without a bias repeats its filters in the bias slot (the importer's form): they
// count once. Two 1x1 convs on 28 x 28 at batch 8 (128 -> 512 -> 64 channels), 32 MiB:
// the first's 256 KiB of filters read 7 more times take 1.75 MiB against an eighth of
// its 15.3 MiB of operands (1.9), the second's 128 KiB 0.88 against 1.72: both worth it
// once, neither twice.
TEST(BatchSlices, RuleCountsEachFilterOnce) {
  for (bool placeholder : {false, true}) {
    Graph g;
    int x = g.add_input("x", f32({8, 128, 28, 28}));
    int w0 = g.add_input("w0", f32({512, 128, 1, 1})), w1 = g.add_input("w1", f32({64, 512, 1, 1}));
    int b0 = g.add_input("b0", f32({512})), b1 = g.add_input("b1", f32({64}));
    auto attrs = conv_attrs(1, 1, false);
    attrs["has_bias"].ints = {SymInt(placeholder ? 0 : 1)};
    int a = g.add_node(Op::conv2d, {x, w0, placeholder ? w0 : b0}, attrs)[0];
    g.outputs = {g.add_node(Op::conv2d, {a, w1, placeholder ? w1 : b1}, attrs)[0]};
    verify(g);
    auto s = find_batch_slices(g, static_shapes(g), size_t(32) << 20);
    ASSERT_EQ(s.size(), 1u) << placeholder;
    EXPECT_EQ(s[0].first, 0) << placeholder;
    EXPECT_EQ(s[0].last, 1) << placeholder;
  }
}

// Runs end at a node that is not per image, at another batch, at an image tensor of
// rank 3, and before a node whose weight the run itself made.
TEST(BatchSlices, RunsEndWhereImagesStopBeingIndependent) {
  Graph g;
  int x = g.add_input("x", f32({4, 3, 8, 8}));
  int w = g.add_input("w", f32({4, 3, 1, 1})), b = g.add_input("b", f32({4}));
  int a = g.add_node(Op::conv2d, {x, w, b}, conv_attrs(1, 1, false))[0];  // 0: [4, 4, 8, 8]
  Node fa;
  fa.set_int("block", 8);
  int ab = g.add_node(Op::to_nchwc, {a}, fa.attrs)[0];                    // 1
  Node fb;
  fb.set_int("channels", 3);
  int wt = g.add_node(Op::from_nchwc, {ab}, fb.attrs)[0];                 // 2: [4, 3, 8, 8]
  // 3: a conv whose filters [4, 3, 8, 8] the run made: not sliced.
  int y = g.add_node(Op::conv2d, {x, wt, b}, conv_attrs(1, 1, false))[0];
  g.outputs = {y};
  verify(g);
  auto s = find_batch_slices(g, static_shapes(g), 64);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].first, 0);
  EXPECT_EQ(s[0].last, 2);
  // An image without a batch, [C, H, W] (a pool takes one): rank 3, never sliced.
  Graph u;
  Node pa;
  pa.set_ints("kernel", {SymInt(2), SymInt(2)});
  pa.set_ints("stride", {SymInt(2), SymInt(2)});
  pa.set_ints("padding", {SymInt(0), SymInt(0)});
  u.outputs = {u.add_node(Op::max_pool2d, {u.add_input("x", f32({4, 8, 8}))}, pa.attrs)[0]};
  verify(u);
  EXPECT_TRUE(find_batch_slices(u, static_shapes(u), 64).empty());
  // Another batch: a second run.
  Graph m;
  int m0 = m.add_input("x", f32({4, 3, 8, 8})), m1 = m.add_input("z", f32({2, 3, 8, 8}));
  int mw = m.add_input("w", f32({3, 3, 1, 1})), mb = m.add_input("b", f32({3}));
  m.add_node(Op::conv2d, {m0, mw, mb}, conv_attrs(1, 1, false));
  m.outputs = {m.add_node(Op::conv2d, {m1, mw, mb}, conv_attrs(1, 1, false))[0], m.nodes[0].outputs[0]};
  verify(m);
  s = find_batch_slices(m, static_shapes(m), 64);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].batch, 4);
  EXPECT_EQ(s[1].batch, 2);
}

// Random per-image graphs: the plan with slices, run pass by pass on paper, keeps every
// value's images until their last read, at every cache size that slices them.
TEST(BatchSlices, PlansHoldPassByPass) {
  std::mt19937 rng(7);
  int sliced = 0, per_pass = 0, multi = 0;
  for (int gi = 0; gi < 300; ++gi) {
    const int64_t N = 2 + int64_t(rng() % 15);
    Graph g = random_image_graph(rng, N);
    verify(g);
    const auto shapes = static_shapes(g);
    for (size_t cache : {size_t(64), size_t(4) << 10, size_t(16) << 10, size_t(64) << 10, size_t(256) << 10,
                         size_t(1) << 20}) {
      const auto slices = find_batch_slices(g, shapes, cache);
      const MemoryPlan plan = plan_memory(g, shapes, slices);
      SCOPED_TRACE("graph " + std::to_string(gi) + ", cache " + std::to_string(cache) + ":\n" + print_graph(g));
      simulate_passes(g, plan, slices);
      if (::testing::Test::HasFailure()) return;
      sliced += !slices.empty();
      for (const BatchSlice& r : slices) multi += r.slice > 1;
      for (const Storage& s : plan.storages) per_pass += s.per_pass;
    }
  }
  EXPECT_GT(sliced, 300);    // 1044 at this seed
  EXPECT_GT(multi, 40);      // 184
  EXPECT_GT(per_pass, 1000);  // 2804
}

// The runtime with slices: every output as the graph computes it unsliced (the kernels
// may choose otherwise for fewer images: within 1e-5), and bit for bit as each pass's
// images computed alone by the same graph built for that many images.
TEST(BatchSlices, RuntimeMatchesUnslicedAndEachPassAlone) {
  std::mt19937 rng(11);
  int checked = 0;
  int compared = 0;
  for (int gi = 0; gi < 120; ++gi) {
    // 13 to 15 images: no filter's first dim (at most 12) or blocked channel count (16)
    // is N, so the text substitution below changes only the images' shapes.
    const int64_t N = 13 + int64_t(rng() % 3);
    Graph g = random_image_graph(rng, N);
    verify(g);
    const auto shapes = static_shapes(g);
    const size_t cache = size_t(1) << (8 + rng() % 10);
    const auto slices = find_batch_slices(g, shapes, cache);
    if (slices.empty()) continue;
    // Inputs: the image and the filters.
    std::vector<std::vector<float>> data;
    std::vector<InTensor> ins;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      data.push_back(randn(size_t(g.type(g.inputs[i]).static_numel()), unsigned(gi * 100 + i)));
      ins.push_back({data.back().data(), DType::f32, shapes[size_t(g.inputs[i])]});
    }
    std::vector<OutTensor> sliced, whole;
    {
      SliceCache c(cache);
      sliced = Executable(g).run(ins, {});
    }
    {
      SliceCache c(0);
      whole = Executable(g).run(ins, {});
    }
    for (size_t o = 0; o < g.outputs.size(); ++o) {
      const size_t n = size_t(g.type(g.outputs[o]).static_numel());
      const float* ps = static_cast<const float*>(sliced[o].data);
      const float* pw = static_cast<const float*>(whole[o].data);
      float scale = 1;  // the kernels' rounding follows the output's magnitude
      for (size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(pw[i]));
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(ps[i], pw[i], 1e-5f * scale) << "graph " << gi << " output " << o << " at " << i;
    }
    ++compared;
    // The graph for S images (when the slice is the whole graph; its text with every
    // "[N, " made "[S, ", which only the images' shapes start with), run on each pass's
    // images of x, gives the sliced run's bytes.
    const BatchSlice& r = slices[0];
    if (slices.size() != 1 || r.first != 0 || size_t(r.last) + 1 != g.nodes.size()) continue;
    std::string text = print_graph(g);
    const std::string from = "[" + std::to_string(N) + ", ", to = "[" + std::to_string(r.slice) + ", ";
    for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size())) text.replace(p, from.size(), to);
    Executable one(parse_graph(text));
    SliceCache c(0);
    const size_t x_image = size_t(g.type(g.inputs[0]).static_numel()) / size_t(N);
    for (int64_t k = 0; k < N / r.slice; ++k) {
      std::vector<InTensor> part = ins;
      part[0].data = data[0].data() + size_t(k * r.slice) * x_image;
      part[0].shape[0] = r.slice;
      auto y = one.run(part, {});
      for (size_t o = 0; o < g.outputs.size(); ++o) {
        const size_t image = size_t(g.type(g.outputs[o]).static_numel()) / size_t(N);
        const float* ps = static_cast<const float*>(sliced[o].data) + size_t(k * r.slice) * image;
        const float* py = static_cast<const float*>(y[o].data);
        for (size_t i = 0; i < size_t(r.slice) * image; ++i)
          ASSERT_EQ(ps[i], py[i]) << "graph " << gi << " output " << o << " pass " << k << " at " << i;
      }
    }
    ++checked;
  }
  EXPECT_GT(compared, 50);  // 108 at this seed
  EXPECT_GT(checked, 10);   // 21
}

// Int8 convs over the blocked layout passing codes between them (u8 in and out, an
// output as floats and codes, a residual as codes): bit for bit, at 4, 8 and 12 images.
TEST(BatchSlices, Int8CodesChainsMatchUnsliced) {
  for (int64_t n : {4, 8, 12}) {
    Graph g = parse_graph(rebatch(kInt8ChainGraph, 2, n));
    layout_nchwc(g);
    dead_code_elimination(g);
    ASSERT_EQ(chain_int8(g), 4);
    verify(g);
    SCOPED_TRACE(n);
    expect_slices_change_nothing(g, 0);
  }
}

// Dynamic int8 (a scale per image, no x_scale), one image 1000x the others, NCHW and
// blocked: bit for bit, so each image's scale is its own in a pass as in the batch.
TEST(BatchSlices, DynamicInt8ScalesStayPerImage) {
  for (int64_t n : {4, 8}) {
    std::string t = rebatch(kInt8ChainGraph, 2, n);
    for (const char* s : {", x_scale=f[0.05]", ", x_scale=f[0.04]", ", x_scale=f[0.3]", ", x_scale=f[0.02]",
                          ", x_scale=f[0.5]"})
      for (size_t p = t.find(s); p != std::string::npos; p = t.find(s)) t.erase(p, std::strlen(s));
    for (bool blocked : {false, true}) {
      Graph g = parse_graph(t);
      if (blocked) {
        layout_nchwc(g);
        dead_code_elimination(g);
      }
      verify(g);
      SCOPED_TRACE(std::to_string(n) + (blocked ? " blocked" : ""));
      expect_slices_change_nothing(g, 0, 1000.0f);
    }
  }
}

// conv2d_pw_dw (blocked and NCHW, with a projection and a residual) and avg_pool2d.
TEST(BatchSlices, FusedBlocksAndAveragePoolsMatchUnsliced) {
  const std::string blocked = R"(graph(%x: f32[4, 2, 28, 28, 8], %w: f32[20, 16, 1, 1], %k: f32[20, 1, 3, 3], %b: f32[20], %u: f32[16, 20, 1, 1], %c: f32[16]) {
  %p: f32[4, 2, 28, 28, 8] = conv2d_pw_dw(%x, %w, %w, %k, %b, %u, %c, %x) {activation=[7], dilation=[1, 1], has_bias=[1], has_residual=[1], padding=[1, 1], pj_has_bias=[1], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1]}
  %q: f32[4, 2, 28, 28, 8] = conv2d_pw_dw(%p, %w, %w, %k, %b, %u, %c, %p) {activation=[7], dilation=[1, 1], has_bias=[1], has_residual=[1], padding=[1, 1], pj_has_bias=[1], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1]}
  %y: f32[4, 16, 28, 28] = from_nchwc(%q) {channels=[16]}
  %z: f32[4, 16, 14, 14] = avg_pool2d(%y) {kernel=[3, 3], stride=[2, 2], padding=[1, 1], ceil_mode=[0], count_include_pad=[0]}
  return (%z)
})";
  const std::string nchw = R"(graph(%x: f32[4, 16, 28, 28], %w: f32[20, 16, 1, 1], %k: f32[20, 1, 3, 3], %b: f32[20], %u: f32[16, 20, 1, 1], %c: f32[16]) {
  %p: f32[4, 16, 28, 28] = conv2d_pw_dw(%x, %w, %w, %k, %b, %u, %c, %x) {activation=[7], dilation=[1, 1], has_bias=[1], has_residual=[1], padding=[1, 1], pj_has_bias=[1], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1]}
  %z: f32[4, 16, 14, 14] = avg_pool2d(%p) {kernel=[2, 2], stride=[2, 2], padding=[0, 0], ceil_mode=[0], count_include_pad=[1]}
  %q: f32[4, 16, 14, 14] = conv2d_pw_dw(%z, %w, %w, %k, %b, %u, %c, %z) {activation=[7], dilation=[1, 1], has_bias=[1], has_residual=[1], padding=[1, 1], pj_has_bias=[1], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1]}
  return (%q, %p)
})";
  for (const std::string* t : {&blocked, &nchw})
    for (int64_t n : {4, 8}) {
      Graph g = parse_graph(rebatch(*t, 4, n));
      verify(g);
      SCOPED_TRACE(std::to_string(n) + (t == &blocked ? " blocked" : " nchw"));
      expect_slices_change_nothing(g, 1e-5f);
    }
}

// A reshape of a value the run makes, returned (its storage outlives the run), a fill
// read inside the run as a batched residual, a graph output in the middle.
TEST(BatchSlices, AliasesAndFillsAroundARun) {
  Graph g = parse_graph(R"(graph(%x: f32[4, 8, 16, 16], %w: f32[8, 8, 3, 3], %b: f32[8]) {
  %a: f32[4, 8, 16, 16] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1], activation=[1]}
  %f: f32[4, 8, 16, 16] = full() {shape=[4, 8, 16, 16], value=f[0.25], dtype=[0]}
  %c: f32[4, 8, 16, 16] = conv2d(%a, %w, %b, %f) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1], has_residual=[1], activation=[1]}
  %d: f32[4, 8, 8, 8] = max_pool2d(%c) {kernel=[2, 2], stride=[2, 2], padding=[0, 0]}
  %r: f32[4, 2048] = reshape(%a) {shape=[4, 2048]}
  %e: f32[4, 8, 8, 8] = conv2d(%d, %w, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1], activation=[1]}
  return (%e, %r, %c)
})");
  verify(g);
  expect_slices_change_nothing(g, 1e-5f);
}

// A conv whose filters a per-image node of the run made, itself worth slicing by its
// 64 x 64 images: the run ends before it (sliced with it, a pass would read the filters
// of one pass's images).
TEST(BatchSlices, RunEndsBeforeAFilterItMade) {
  Graph g = parse_graph(R"(graph(%x: f32[4, 3, 8, 8], %w: f32[4, 3, 1, 1], %b: f32[4], %z: f32[4, 3, 64, 64]) {
  %a: f32[4, 4, 8, 8] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1]}
  %ab: f32[4, 1, 8, 8, 8] = to_nchwc(%a) {block=[8]}
  %wt: f32[4, 3, 8, 8] = from_nchwc(%ab) {channels=[3]}
  %y: f32[4, 4, 57, 57] = conv2d(%z, %wt, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1]}
  return (%y)
})");
  verify(g);
  auto s = find_batch_slices(g, static_shapes(g), 64);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].last, 2);
  expect_slices_change_nothing(g, 1e-5f);
}
