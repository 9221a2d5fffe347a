// The runtime on hand-built graphs: results, symbolic shapes, arena reuse, input
// validation, half-precision storage, and concurrent calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "zenith/buffer_cache.h"
#include "zenith/error.h"
#include "zenith/passes/passes.h"
#include "zenith/profiler.h"
#include "zenith/kernels/kernels.h"
#include "zenith/runtime.h"
#include "zenith/runtime_test_hooks.h"
#include "zenith/threadpool.h"
#include "test_util.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

using namespace zenith;

namespace {
std::vector<float> iota(size_t n, float start = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}
const float* f(const OutTensor& t) { return static_cast<const float*>(t.data); }
}  // namespace

TEST(Runtime, ElementwiseChain) {
  Executable exe(parse_graph(R"(graph(%x: f32[2, 3], %y: f32[3]) {
  %a: f32[2, 3] = add(%x, %y)
  %b: f32[2, 3] = relu(%a)
  %c: f32[2, 3] = mul(%b, %b)
  return (%c)
})"));
  auto x = iota(6, -3.0f), y = iota(3, -1.0f);
  auto out = exe.run({{x.data(), DType::f32, {2, 3}}, {y.data(), DType::f32, {3}}}, {});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 6; ++i) {
    float a = x[size_t(i)] + y[size_t(i % 3)];
    float r = a > 0 ? a : 0;
    EXPECT_FLOAT_EQ(f(out[0])[i], r * r);
  }
}

// The planner gives a value returned twice, or beside a reshape of it, one buffer; the
// caller gets a buffer per output all the same (the first takes the planned one, the
// others copies), so writing into one output changes no other: a training forward's
// output and the tensor it saves for backward are such a pair.
TEST(Runtime, EachOutputHasABufferOfItsOwn) {
  Executable exe(parse_graph(R"(graph(%x: f32[6]) {
  %a: f32[6] = exp(%x)
  %r: f32[2, 3] = reshape(%a) {shape=[2, 3]}
  %b: f32[6] = neg(%a)
  return (%a, %b, %a, %r, %x)
})"));
  auto x = iota(6, -3.0f);
  for (int call = 0; call < 2; ++call) {
    auto out = exe.run({{x.data(), DType::f32, {6}}}, {});
    ASSERT_EQ(out.size(), 5u);
    std::set<const void*> seen;
    for (const OutTensor& o : out) EXPECT_TRUE(seen.insert(o.data).second) << "two outputs share a buffer";
    EXPECT_NE(out[4].data, static_cast<const void*>(x.data()));
    for (int i = 0; i < 6; ++i) {
      const float e = std::exp(x[size_t(i)]);
      EXPECT_FLOAT_EQ(f(out[0])[i], e);
      EXPECT_FLOAT_EQ(f(out[1])[i], -e);
      EXPECT_FLOAT_EQ(f(out[2])[i], e);
      EXPECT_FLOAT_EQ(f(out[3])[i], e);
      EXPECT_FLOAT_EQ(f(out[4])[i], x[size_t(i)]);
    }
    EXPECT_EQ(out[3].shape, (std::vector<int64_t>{2, 3}));
  }
}

TEST(Runtime, OutputBuffersReusedAndReturnedConcurrently) {
  // A call's large outputs return to the buffer cache when their last owner lets go and
  // the next call of the same sizes gets them back (their pages faulted in once); two
  // outputs alive at once never share one; small buffers are not cached; the cache holds
  // at most its limit, oldest evicted first; release_buffer_cache empties it; buffers
  // taken and freed from several threads at once (TSan's run checks the locking).
  if (buffer_cache_limit() == 0) GTEST_SKIP() << "no cache (ZENITH_OUTPUT_CACHE_MB=0)";
  release_buffer_cache();
  const int64_t n = 100000;  // 400 KB: cached
  Executable exe(parse_graph(R"(graph(%x: f32[100000]) {
  %a: f32[100000] = exp(%x)
  %b: f32[100000] = neg(%a)
  return (%a, %b)
})"));
  std::vector<float> x(size_t(n), 0.5f);
  std::set<const void*> first;
  {
    auto out = exe.run({{x.data(), DType::f32, {n}}}, {});
    ASSERT_NE(out[0].data, out[1].data);
    first = {out[0].data, out[1].data};
    EXPECT_EQ(buffer_cache_bytes(), 0u);
  }
  const size_t page_rounded = (size_t(n) * 4 + 4095) / 4096 * 4096;
  EXPECT_EQ(buffer_cache_bytes(), 2 * page_rounded);
  {
    auto out = exe.run({{x.data(), DType::f32, {n}}}, {});
    EXPECT_EQ((std::set<const void*>{out[0].data, out[1].data}), first) << "the freed buffers were not reused";
    EXPECT_EQ(buffer_cache_bytes(), 0u);
    for (int64_t i = 0; i < n; i += 9973) {
      EXPECT_FLOAT_EQ(f(out[0])[i], std::exp(0.5f));
      EXPECT_FLOAT_EQ(f(out[1])[i], -std::exp(0.5f));
    }
  }
  {
    auto small = cached_buffer(kMinCachedBytes - 1);
    auto odd = cached_buffer(size_t(n) * 4 + 4096);  // another size: a new buffer
    EXPECT_EQ(first.count(odd.get()), 0u);
  }
  EXPECT_EQ(buffer_cache_bytes(), 2 * page_rounded + page_rounded + 4096);
  // Over the limit: three buffers of 0.4 of it each, freed in turn; the oldest goes.
  const size_t big = buffer_cache_limit() / 5 * 2 / 4096 * 4096;
  release_buffer_cache();
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  {
    auto a = cached_buffer(big), b = cached_buffer(big), c = cached_buffer(big);
    const void* pa = a.get();
    const void* pc = c.get();
    a.reset();
    b.reset();
    EXPECT_EQ(buffer_cache_bytes(), 2 * big);
    c.reset();  // a evicted
    EXPECT_EQ(buffer_cache_bytes(), 2 * big);
    auto again = cached_buffer(big);  // the newest: c's
    EXPECT_EQ(again.get(), pc);
    EXPECT_NE(again.get(), pa);
    EXPECT_EQ(buffer_cache_bytes(), big);
  }
  EXPECT_EQ(release_buffer_cache(), 2 * big);  // b and c (again) returned
  // Four threads each keeping up to 6 buffers of 3 sizes alive, filled with a pattern of
  // their own and checked before letting go, while the others take and return theirs:
  // a buffer handed to two owners at once shows as a pattern overwritten.
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t, &bad] {
      std::vector<std::pair<std::shared_ptr<void>, size_t>> live;
      for (int i = 0; i < 300; ++i) {
        const size_t words = kMinCachedBytes / 4 * size_t(1 + (i + t) % 3);
        auto p = cached_buffer(words * 4);
        auto* w = static_cast<uint32_t*>(p.get());
        for (size_t k = 0; k < words; k += 97) w[k] = uint32_t(t * 100000 + i);
        live.emplace_back(std::move(p), size_t(i) << 32 | words);
        if (live.size() > 6) {
          const auto& [q, tag] = live.front();
          const auto* v = static_cast<const uint32_t*>(q.get());
          for (size_t k = 0; k < (tag & 0xffffffffu); k += 97)
            if (v[k] != uint32_t(t * 100000 + int(tag >> 32))) ++bad;
          live.erase(live.begin());
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0) << "a buffer was handed to two owners at once";
  EXPECT_LE(buffer_cache_bytes(), buffer_cache_limit());
  release_buffer_cache();
  EXPECT_EQ(buffer_cache_bytes(), 0u);
}

TEST(Runtime, SymbolicShapesPlanPerSignature) {
  Executable exe(parse_graph(R"(graph(%x: f32[s0, 4]) {
  %r: f32[(s0*2), 2] = reshape(%x) {shape=[(s0*2), 2]}
  %s: f32[(s0*2)] = reduce_sum(%r) {dims=[1], keepdim=[0]}
  return (%s)
})"));
  for (int64_t n : {1, 3, 7, 3}) {
    auto x = iota(size_t(n * 4));
    auto out = exe.run({{x.data(), DType::f32, {n, 4}}}, {});
    ASSERT_EQ(out[0].shape, std::vector<int64_t>{n * 2});
    for (int64_t i = 0; i < n * 2; ++i) EXPECT_FLOAT_EQ(f(out[0])[i], x[size_t(2 * i)] + x[size_t(2 * i + 1)]);
  }
  EXPECT_EQ(exe.num_plans(), 3u);
}

// sym_value: a size used as a number (an HF decoder's positions, arange(new) + past), its
// value per plan from the shape that binds the symbol, in each dtype it makes.
TEST(Runtime, SymValueIsTheSizeOfThisCall) {
  Executable exe(parse_graph(R"(graph(%p: f32[1, s0, 2], %x: i64[s1]) {
  %a: i64[s1] = arange() {dtype=[3], size=[s1], start=f[0], step=f[1]}
  %t: i64[] = sym_value() {value=[s0], dtype=[3]}
  %pos: i64[s1] = add(%a, %t)
  %u: i32[] = sym_value() {value=[((s0*3)+s1)], dtype=[4]}
  %v: f32[] = sym_value() {value=[s0], dtype=[0]}
  return (%pos, %u, %v)
})"));
  for (auto [past, n] : {std::pair<int64_t, int64_t>{0, 4}, {7, 1}, {1, 1}, {50, 3}}) {
    std::vector<float> p(size_t(past * 2) + 1);
    std::vector<int64_t> x(static_cast<size_t>(n));
    auto out = exe.run({{p.data(), DType::f32, {1, past, 2}}, {x.data(), DType::i64, {n}}}, {});
    ASSERT_EQ(out[0].shape, std::vector<int64_t>{n});
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(static_cast<const int64_t*>(out[0].data)[i], past + i);
    EXPECT_TRUE(out[1].shape.empty());
    EXPECT_EQ(*static_cast<const int32_t*>(out[1].data), int32_t(past * 3 + n));
    EXPECT_EQ(*static_cast<const float*>(out[2].data), float(past));
  }
  // Only i64, i32 and f32; a value past i32 is an error, not a wrapped number.
  EXPECT_THROW(parse_graph(R"(graph(%p: f32[s0]) {
  %t: b8[] = sym_value() {value=[s0], dtype=[5]}
  return (%t)
})"), Error);
  Executable narrow(parse_graph(R"(graph(%p: f32[s0]) {
  %t: i32[] = sym_value() {value=[(s0*1073741824)], dtype=[4]}
  return (%t)
})"));
  float one = 0;
  EXPECT_EQ(*static_cast<const int32_t*>(narrow.run({{&one, DType::f32, {1}}}, {})[0].data), 1 << 30);
  std::vector<float> two(2);
  EXPECT_THROW(narrow.run({{two.data(), DType::f32, {2}}}, {}), Error);
}

// A new signature reuses the last plan's NodePlan of a node whose operand shapes and
// symbolic attributes are unchanged: the nodes that see only s0 when only s1 moves. A
// node whose inputs are the same but whose attribute moves (the slice's end, sym_value's
// value) must be prepared anew. Every call against a reference, in a varied order, with
// the weight read as given and packed (a constant input: packed copies bound per NodePlan).
TEST(Runtime, NodesWhoseOperandsStayKeepTheirPlans) {
  const char* text = R"(graph(%x: f32[s0, 4], %p: f32[s1], %w: f32[8, 4]) {
  %h: f32[s0, 8] = matmul(%x, %w) {trans_b=[1]}
  %a: f32[s0, 8] = relu(%h)
  %c: f32[s1, 4] = slice(%w) {dim=[0], start=[0], end=[s1], out_size=[s1]}
  %t: f32[] = sym_value() {value=[s1], dtype=[0]}
  %d: f32[s1, 4] = add(%c, %t)
  return (%a, %d)
})";
  std::vector<float> w(32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 7) - 3.0f;
  for (bool constant : {false, true}) {
    Executable exe(parse_graph(text));
    if (constant) exe.set_constant_inputs({2});
    // (s0, s1) per call, and how many of the 5 nodes that call prepares: all at first, those
    // of the symbol that moved, none for a signature seen before, all when both move.
    const std::vector<std::array<int64_t, 3>> calls = {{2, 3, 5}, {2, 5, 3}, {2, 1, 3}, {3, 1, 2},
                                                       {3, 8, 3}, {2, 3, 0}, {1, 0, 5}};
    for (const auto& [n, m, prepared] : calls) {
      std::vector<float> x(size_t(n * 4)), p(size_t(m) + 1);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f - float(n);
      const uint64_t before = test_hooks::node_plans_prepared.load();
      auto out = exe.run({{x.data(), DType::f32, {n, 4}}, {p.data(), DType::f32, {m}}, {w.data(), DType::f32, {8, 4}}}, {});
      EXPECT_EQ(test_hooks::node_plans_prepared.load() - before, uint64_t(prepared)) << n << " " << m;
      ASSERT_EQ(out[0].shape, (std::vector<int64_t>{n, 8}));
      ASSERT_EQ(out[1].shape, (std::vector<int64_t>{m, 4}));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < 8; ++j) {
          float dot = 0;
          for (int64_t k = 0; k < 4; ++k) dot += x[size_t(i * 4 + k)] * w[size_t(j * 4 + k)];
          EXPECT_FLOAT_EQ(f(out[0])[i * 8 + j], std::max(dot, 0.0f)) << n << " " << m;
        }
      for (int64_t i = 0; i < m * 4; ++i) EXPECT_EQ(f(out[1])[i], w[size_t(i)] + float(m)) << n << " " << m;
    }
  }
}

TEST(Runtime, SymbolFromIntegerInput) {
  Executable exe(parse_graph(R"(graph(%x: i64[3]) {
  %a: i64[s1] = arange() {dtype=[3], size=[s1], start=f[0], step=f[1]}
  %b: i64[3] = add(%x, %x)
  return (%a, %b)
})"), Device::kCPU, {"s1"});
  std::vector<int64_t> x{1, 2, 3};
  auto out = exe.run({{x.data(), DType::i64, {3}}}, {5});
  ASSERT_EQ(out[0].shape, std::vector<int64_t>{5});
  EXPECT_EQ(static_cast<const int64_t*>(out[0].data)[4], 4);
}

TEST(Runtime, ArenaReusesDeadBuffers) {
  // A chain of 8 elementwise ops over 1 MiB values needs only two live buffers at a
  // time (the last one is an output with its own buffer).
  std::string text = "graph(%x: f32[262144]) {\n  %v0: f32[262144] = neg(%x)\n";
  for (int i = 1; i < 8; ++i)
    text += "  %v" + std::to_string(i) + ": f32[262144] = neg(%v" + std::to_string(i - 1) + ")\n";
  text += "  return (%v7)\n}\n";
  Executable exe(parse_graph(text));
  auto x = iota(262144);
  auto out = exe.run({{x.data(), DType::f32, {262144}}}, {});
  EXPECT_FLOAT_EQ(f(out[0])[10], 10.0f);
  EXPECT_LE(exe.planned_arena_bytes(), 2u * 262144 * 4);
  EXPECT_GT(exe.planned_arena_bytes(), 0u);
}

TEST(Runtime, NoReuseWhileStillLive) {
  // %a is read by the last node, so nothing may overwrite it in between.
  Executable exe(parse_graph(R"(graph(%x: f32[4]) {
  %a: f32[4] = neg(%x)
  %b: f32[4] = exp(%a)
  %c: f32[4] = neg(%b)
  %d: f32[4] = add(%c, %a)
  return (%d)
})"));
  auto x = iota(4);
  auto out = exe.run({{x.data(), DType::f32, {4}}}, {});
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(f(out[0])[i], -std::exp(-x[size_t(i)]) - x[size_t(i)]);
}

TEST(Runtime, ValidatesInputs) {
  Executable exe(parse_graph(R"(graph(%x: f32[s0, 4], %y: f32[s0, 4]) {
  %a: f32[s0, 4] = add(%x, %y)
  return (%a)
})"));
  auto buf = iota(32);
  auto expect_error = [&](std::vector<InTensor> ins, const char* needle) {
    try {
      exe.run(ins, {});
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{buf.data(), DType::f32, {2, 4}}}, "expected 2 tensor inputs");
  expect_error({{buf.data(), DType::f32, {2, 4}}, {buf.data(), DType::i64, {2, 4}}}, "input 1 (y): dtype i64");
  expect_error({{buf.data(), DType::f32, {2, 5}}, {buf.data(), DType::f32, {2, 4}}}, "input 0 (x): dim 1 is 5");
  expect_error({{buf.data(), DType::f32, {2, 4}}, {buf.data(), DType::f32, {3, 4}}}, "conflicts with s0");
  expect_error({{buf.data(), DType::f32, {8}}, {buf.data(), DType::f32, {2, 4}}}, "input 0 (x): rank 1");
}

TEST(Runtime, KernelErrorsPropagate) {
  Executable exe(parse_graph(R"(graph(%w: f32[3, 2], %i: i64[2]) {
  %e: f32[2, 2] = embedding(%w, %i)
  return (%e)
})"));
  auto w = iota(6);
  std::vector<int64_t> ok{0, 2}, bad{0, 3};
  EXPECT_NO_THROW(exe.run({{w.data(), DType::f32, {3, 2}}, {ok.data(), DType::i64, {2}}}, {}));
  EXPECT_THROW(exe.run({{w.data(), DType::f32, {3, 2}}, {bad.data(), DType::i64, {2}}}, {}), Error);
  // The context went back to the pool: the next call still works.
  EXPECT_NO_THROW(exe.run({{w.data(), DType::f32, {3, 2}}, {ok.data(), DType::i64, {2}}}, {}));
}

TEST(Runtime, OutputsThatAliasInputsAreCopies) {
  Executable exe(parse_graph(R"(graph(%x: f32[4]) {
  %r: f32[2, 2] = reshape(%x) {shape=[2, 2]}
  return (%r, %x)
})"));
  auto x = iota(4);
  auto out = exe.run({{x.data(), DType::f32, {4}}}, {});
  EXPECT_NE(out[0].data, x.data());
  EXPECT_NE(out[1].data, x.data());
  EXPECT_FLOAT_EQ(f(out[0])[3], 3.0f);
}

// PyTorch hands empty tensors over with a null data pointer. Kernels must never see it:
// memcpy(dst, nullptr, 0) is undefined behavior (make test-sanitize's UBSan reported the
// copy kernel and the runtime's output copy on the op tests' empty shapes).
TEST(Runtime, EmptyInputsWithNullData) {
  Executable exe(parse_graph(R"(graph(%e: f32[0, 3], %x: f32[2, 3]) {
  %c: f32[2, 3] = cat(%e, %x) {dim=[0]}
  %p: f32[3, 0] = permute(%e) {perm=[1, 0]}
  return (%c, %p, %e)
})"));
  auto x = iota(6);
  auto out = exe.run({{nullptr, DType::f32, {0, 3}}, {x.data(), DType::f32, {2, 3}}}, {});
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(f(out[0])[i], x[size_t(i)]);
  EXPECT_EQ(out[1].shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(out[2].shape, (std::vector<int64_t>{0, 3}));
}

TEST(Runtime, HalfStorageComputesInFloat) {
  Executable exe(parse_graph(R"(graph(%x: bf16[3], %y: f16[3]) {
  %a: bf16[3] = exp(%x)
  %b: f32[3] = cast(%y) {dtype=[0]}
  return (%a, %b)
})"));
  std::vector<uint16_t> x{f32_to_bf16(0.0f), f32_to_bf16(1.0f), f32_to_bf16(-1.0f)};
  std::vector<uint16_t> y{f32_to_f16(0.5f), f32_to_f16(-2.0f), f32_to_f16(65504.0f)};
  auto out = exe.run({{x.data(), DType::bf16, {3}}, {y.data(), DType::f16, {3}}}, {});
  const uint16_t* a = static_cast<const uint16_t*>(out[0].data);
  EXPECT_EQ(a[1], f32_to_bf16(std::exp(1.0f)));
  EXPECT_FLOAT_EQ(f(out[1])[2], 65504.0f);
}

// Memory plans are shared by symbol values in one bucket (sized at its top) and
// reused; a value whose size shrinks as a symbol grows (not monotone) must not take the
// bucket's plan. Every call is checked against the formula, across buckets, back and
// forth, so a slot sized for another call would show as wrong sums or a sanitizer report.
TEST(Runtime, BucketedMemoryPlansHoldForGrowingAndShrinkingSizes) {
  Executable exe(parse_graph(R"(graph(%x: f32[s0, 4], %t: f32[64, 4]) {
  %a: f32[(64 - s0), 4] = slice(%t) {dim=[0], start=[s0], end=[64], out_size=[(64 - s0)]}
  %b: f32[(64 - s0), 4] = tanh(%a)
  %c: f32[(64 - s0), 4] = mul(%b, %b)
  %d: f32[4] = reduce_sum(%c) {dims=[0], keepdim=[0]}
  %e: f32[s0, 4] = tanh(%x)
  %f: f32[s0, 4] = add(%e, %e)
  %g: f32[s0, 4] = mul(%f, %e)
  return (%d, %g)
})"));
  auto t = iota(64 * 4, -128.0f);
  for (auto& v : t) v *= 0.01f;
  for (int64_t rows : {1, 2, 15, 16, 17, 31, 3, 40, 63, 17, 129, 130, 5}) {
    if (rows > 63) continue;  // the slice needs s0 <= 64
    auto x = iota(size_t(rows * 4), -3.0f);
    for (auto& v : x) v *= 0.1f;
    auto out = exe.run({{x.data(), DType::f32, {rows, 4}}, {t.data(), DType::f32, {64, 4}}}, {});
    ASSERT_EQ(out[1].shape, (std::vector<int64_t>{rows, 4}));
    for (int64_t j = 0; j < 4; ++j) {
      double want = 0;
      for (int64_t r = rows; r < 64; ++r) want += std::pow(std::tanh(double(t[size_t(r * 4 + j)])), 2);
      EXPECT_NEAR(f(out[0])[j], want, 1e-4 * (1 + std::abs(want))) << "rows " << rows << " col " << j;
    }
    for (int64_t i = 0; i < rows * 4; ++i) {
      double e = std::tanh(double(x[size_t(i)]));
      EXPECT_NEAR(f(out[1])[i], 2 * e * e, 1e-5) << "rows " << rows << " at " << i;
    }
  }
}

// A C++ program that never sets a count runs on OpenMP's (OMP_NUM_THREADS, else the CPUs it
// may use; torch.set_num_threads sets the same), following it until set_num_threads is called;
// 0 returns to it.
TEST(Threads, DefaultIsOpenMPsCountUntilSet) {
  set_num_threads(0);
#if defined(_OPENMP)
  const int omp = omp_get_max_threads();
  EXPECT_EQ(num_threads(), omp);
  omp_set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  set_num_threads(2);
  EXPECT_EQ(num_threads(), 2);  // set: OpenMP's count no longer matters
  set_num_threads(0);
  EXPECT_EQ(num_threads(), 3);
  omp_set_num_threads(omp);
#else
  EXPECT_EQ(num_threads(), 1);  // (the TSan build has no OpenMP: every loop runs inline)
#endif
  EXPECT_THROW(set_num_threads(-1), Error);
  set_num_threads(1);
}

TEST(Runtime, ConcurrentCallsAgree) {
  Executable exe(parse_graph(R"(graph(%x: f32[s0, 64], %w: f32[64, 64]) {
  %a: f32[s0, 64] = matmul(%x, %w)
  %b: f32[s0, 64] = tanh(%a)
  %c: f32[s0, 64] = softmax(%b) {dim=[-1]}
  return (%c)
})"));
  auto w = iota(64 * 64, -2048.0f);
  for (auto& v : w) v *= 1e-4f;
  auto run_rows = [&](int64_t rows) {
    auto x = iota(size_t(rows * 64));
    auto out = exe.run({{x.data(), DType::f32, {rows, 64}}, {w.data(), DType::f32, {64, 64}}}, {});
    return std::vector<float>(f(out[0]), f(out[0]) + rows * 64);
  };
  auto ref5 = run_rows(5), ref9 = run_rows(9);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i)
        if (run_rows((t + i) % 2 ? 5 : 9) != ((t + i) % 2 ? ref5 : ref9)) ++bad;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// Four threads call one executable at once, each with its own batch sizes (new plans
// built while others run) and weight slot (packed copies per slot), while a fifth drops
// the packed weights and marks the constants again, over the default pipeline's blocked
// convs, a GEMM with packed B and an int8 qmatmul. Every answer must equal the same
// call's answer on a fresh executable called alone. ThreadSanitizer runs it too (make
// test-tsan), so a race in plan building, context pooling or packing is reported even
// where the answers happen to come out right.
TEST(Runtime, ConcurrentCallsWhilePackingAndPlanning) {
  set_num_threads(1);  // each std::thread would start its own OpenMP team (see test_batch_slices)
  const char* text = R"(graph(%x: f32[s0, 16, 12, 12], %w: f32[16, 16, 3, 3], %b: f32[16], %w1: f32[32, 16, 1, 1], %fc: f32[10, 32], %fb: f32[10], %q: u8[24, 36], %t: f32[s0, 32]) {
  %c: f32[s0, 16, 12, 12] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1]}
  %r: f32[s0, 16, 12, 12] = relu(%c)
  %d: f32[s0, 32, 12, 12] = conv2d(%r, %w1, %w1) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %p: f32[s0, 32, 1, 1] = adaptive_avg_pool2d(%d) {output_size=[1, 1]}
  %f: f32[s0, 32] = reshape(%p) {shape=[s0, 32]}
  %y: f32[s0, 10] = addmm(%fb, %f, %fc) {trans_b=[1]}
  %z: f32[s0, 24] = qmatmul(%t, %q) {format=int8}
  return (%y, %z)
})";
  auto build = [&] {
    Graph g = parse_graph(text);
    run_default_pipeline(g);
    return std::make_unique<Executable>(std::move(g));
  };
  const std::vector<int> constants{1, 2, 3, 4, 5, 6};
  // Two sets of weights (slot 0 and slot 1), each at its own addresses.
  std::vector<std::vector<std::vector<float>>> fw(2);
  std::vector<std::vector<uint8_t>> qw(2);
  for (int s = 0; s < 2; ++s) {
    fw[size_t(s)] = {randn(16 * 16 * 9, 10 + s, 0.2f), randn(16, 20 + s), randn(32 * 16, 30 + s, 0.3f),
                     randn(10 * 32, 40 + s, 0.3f), randn(10, 50 + s)};
    std::vector<uint8_t> q(24 * 36);
    std::mt19937 rng(60 + s);
    for (int n = 0; n < 24; ++n) {
      const float scale = 0.01f * float(n + 1);
      std::memcpy(&q[size_t(n * 36)], &scale, 4);
      for (int k = 0; k < 32; ++k) q[size_t(n * 36 + 4 + k)] = uint8_t(int8_t(int(rng() % 255) - 127));
    }
    qw[size_t(s)] = std::move(q);
  }
  const std::vector<int64_t> batches{1, 2, 3, 5, 8, 17, 24};
  std::map<int64_t, std::pair<std::vector<float>, std::vector<float>>> inputs;
  for (int64_t n : batches) inputs[n] = {randn(size_t(n * 16 * 144), unsigned(n)), randn(size_t(n * 32), unsigned(100 + n))};
  auto call = [&](const Executable& e, int64_t n, int slot) {
    const auto& w = fw[size_t(slot)];
    const auto& in = inputs.at(n);  // (at: threads only read the maps)
    auto out = e.run({{in.first.data(), DType::f32, {n, 16, 12, 12}}, {w[0].data(), DType::f32, {16, 16, 3, 3}},
                      {w[1].data(), DType::f32, {16}}, {w[2].data(), DType::f32, {32, 16, 1, 1}},
                      {w[3].data(), DType::f32, {10, 32}}, {w[4].data(), DType::f32, {10}},
                      {qw[size_t(slot)].data(), DType::u8, {24, 36}}, {in.second.data(), DType::f32, {n, 32}}},
                     {}, slot);
    return std::make_pair(std::vector<float>(f(out[0]), f(out[0]) + n * 10),
                          std::vector<float>(f(out[1]), f(out[1]) + n * 24));
  };
  std::map<std::pair<int64_t, int>, std::pair<std::vector<float>, std::vector<float>>> want;
  for (int slot = 0; slot < 2; ++slot)
    for (int64_t n : batches) {
      auto alone = build();  // a fresh executable per reference: no state from other calls
      alone->set_constant_inputs(constants);
      want[{n, slot}] = call(*alone, n, slot);
    }
  auto exe = build();
  exe->set_constant_inputs(constants);
  std::atomic<int> bad{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 24; ++i) {
        const int64_t n = batches[size_t(t * 3 + i) % batches.size()];
        const int slot = (t + i) % 2;
        auto got = call(*exe, n, slot);
        const auto& w = want.at({n, slot});
        for (size_t k = 0; k < got.first.size(); ++k)
          if (!(std::fabs(got.first[k] - w.first[k]) <= 1e-4f * (1.0f + std::fabs(w.first[k])))) {
            ++bad;
            break;
          }
        if (got.second != w.second) ++bad;  // the int8 kernels sum integers: exact
      }
      ++done;
    });
  threads.emplace_back([&] {
    for (int i = 0; done.load() < 4; ++i) {
      if (i % 2) exe->drop_packed();
      else exe->set_constant_inputs(constants);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(exe->num_plans(), 1u);
}

TEST(Runtime, FusedEpilogueMatchesSeparateOps) {
  const char* text = R"(graph(%x: f32[7, 9], %w: f32[11, 9], %b: f32[11]) {
  %y: f32[7, 11] = addmm(%b, %x, %w) {trans_b=[1]}
  %z: f32[7, 11] = gelu(%y) {approximate=[1]}
  %s: f32[7, 11] = addmm(%b, %x, %w) {trans_b=[1]}
  %q: f32[7, 11] = silu(%s)
  %t: f32[7, 11] = addmm(%b, %x, %w) {trans_b=[1]}
  %u: f32[7, 11] = clamp(%t) {min=f[0], max=f[6]}
  %v: f32[7, 11] = addmm(%b, %x, %w) {trans_b=[1]}
  %h: f32[7, 11] = hardswish(%v)
  %e: f32[7, 11] = addmm(%b, %x, %w) {trans_b=[1]}
  %g: f32[7, 11] = hardsigmoid(%e)
  return (%z, %q, %u, %h, %g)
})";
  Graph fused = parse_graph(text);
  EXPECT_EQ(fuse_epilogue(fused), 5);
  dead_code_elimination(fused);
  Executable a(parse_graph(text)), b(std::move(fused));
  auto x = iota(63, -30.0f), w = iota(99, -50.0f), bias = iota(11, -5.0f);
  for (auto& v : x) v *= 0.05f;
  for (auto& v : w) v *= 0.02f;
  std::vector<InTensor> ins{{x.data(), DType::f32, {7, 9}}, {w.data(), DType::f32, {11, 9}}, {bias.data(), DType::f32, {11}}};
  auto ra = a.run(ins, {}), rb = b.run(ins, {});
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 77; ++i) EXPECT_FLOAT_EQ(f(ra[size_t(k)])[i], f(rb[size_t(k)])[i]) << k << " at " << i;
  // The values span the hard activations' kinks (below -3, between, above 3 and 6).
  EXPECT_LT(*std::min_element(f(rb[3]), f(rb[3]) + 77), 0.0f);
  EXPECT_EQ(*std::max_element(f(rb[2]), f(rb[2]) + 77), 6.0f);
  EXPECT_EQ(*std::min_element(f(rb[4]), f(rb[4]) + 77), 0.0f);
}

// matmul(trans_a), a batched matmul(trans_a) and addmm(trans_a, trans_b) once
// canonicalize folds the permute copies (4 of them).
const char* const kTransposedOperands = R"(graph(%dy: f32[37, 9], %x: f32[37, 11], %b: f32[11], %v: f32[3, 6, 9]) {
  %t: f32[9, 37] = permute(%dy) {perm=[1, 0]}
  %w: f32[9, 11] = matmul(%t, %x)
  %u: f32[3, 9, 6] = permute(%v) {perm=[0, 2, 1]}
  %z: f32[3, 9, 9] = matmul(%u, %v)
  %xt: f32[11, 37] = permute(%x) {perm=[1, 0]}
  %y: f32[9, 11] = addmm(%b, %t, %xt) {trans_b=[1]}
  return (%w, %z, %y)
})";

TEST(Runtime, TransposedOperandsMatchPermuteCopies) {
  // matmul / addmm reading A (and B) transposed through strides against the same
  // products with the transposes as permute copies (canonicalize folds them).
  const char* text = kTransposedOperands;
  Graph folded = parse_graph(text);
  EXPECT_EQ(canonicalize(folded), 4);
  dead_code_elimination(folded);
  Executable a(parse_graph(text)), b(std::move(folded));
  auto dy = iota(37 * 9, -150.0f), x = iota(37 * 11, -200.0f), bias = iota(11, -5.0f), v = iota(3 * 6 * 9, -80.0f);
  for (auto& t : dy) t = std::sin(t);
  for (auto& t : x) t *= 0.01f;
  for (auto& t : v) t = std::cos(t);
  std::vector<InTensor> ins{{dy.data(), DType::f32, {37, 9}}, {x.data(), DType::f32, {37, 11}},
                            {bias.data(), DType::f32, {11}}, {v.data(), DType::f32, {3, 6, 9}}};
  auto ra = a.run(ins, {}), rb = b.run(ins, {});
  const int sizes[] = {99, 243, 99};
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < sizes[o]; ++i)
      EXPECT_NEAR(f(ra[size_t(o)])[i], f(rb[size_t(o)])[i], 1e-5f * (1 + std::fabs(f(ra[size_t(o)])[i]))) << o << " " << i;
}

TEST(Runtime, TraceGivesEachGemmsShapeFromItsOperands) {
  // kTransposedOperands' folded transposes: each GEMM event's M x N x K, K read from
  // the transposed side, batch folded into M.
  Graph g = parse_graph(kTransposedOperands);
  ASSERT_EQ(canonicalize(g), 4);
  dead_code_elimination(g);
  Executable exe(std::move(g));
  std::vector<float> dy(37 * 9, 0.5f), x(37 * 11, 0.25f), bias(11, 1.0f), v(3 * 6 * 9, -0.5f);
  std::vector<InTensor> ins{{dy.data(), DType::f32, {37, 9}}, {x.data(), DType::f32, {37, 11}},
                            {bias.data(), DType::f32, {11}}, {v.data(), DType::f32, {3, 6, 9}}};
  profile_reset();
  profile_trace_enable(true);
  profile_enable(true);
  exe.run(ins, {});
  profile_enable(false);
  profile_trace_enable(false);
  using MNK = std::array<int64_t, 3>;
  std::map<std::string, std::vector<MNK>> shapes;
  for (const ProfileEvent& e : profile_events()) shapes[op_info(e.op).name].push_back({e.gemm.m, e.gemm.n, e.gemm.k});
  profile_reset();
  std::sort(shapes["matmul"].begin(), shapes["matmul"].end());
  EXPECT_EQ(shapes["matmul"], (std::vector<MNK>{{9, 11, 37}, {27, 9, 6}}));
  EXPECT_EQ(shapes["addmm"], (std::vector<MNK>{{9, 11, 37}}));
  EXPECT_EQ(shapes.size(), 2u);  // nothing else runs here; test_profile.py has other ops carry none
}

TEST(Runtime, FusedElementwiseMatchesSeparateOps) {
  // The same chains fused and unfused give identical values: flat inputs (tiles and
  // thread chunks past 256 / 4096 elements), a row-broadcast bias, a column-broadcast
  // scale, a scalar pow exponent and a tensor one, NaN and infinities, 1 and 2 threads.
  const char* text = R"(graph(%x: f32[37, 301], %b: f32[301], %c: f32[37, 1], %y: f32[37, 301]) {
  %k: f32[] = constant() {dtype=[0], shape=[]} data=00004040
  %xb: f32[37, 301] = add(%x, %b)
  %p: f32[37, 301] = pow(%xb, %k)
  %t: f32[37, 301] = tanh(%p)
  %g: f32[37, 301] = gelu(%t) {approximate=[1]}
  %m: f32[37, 301] = mul(%g, %c)
  %q: f32[37, 301] = pow(%y, %xb)
  %a: f32[37, 301] = abs(%x)
  %e: f32[37, 301] = sqrt(%a)
  %r: f32[37, 301] = relu(%y)
  %d: f32[37, 301] = div(%r, %e)
  %mx: f32[37, 301] = maximum(%d, %y)
  %s: f32[37, 301] = add(%mx, %q)
  %n: f32[37, 301] = neg(%s)
  return (%m, %n)
})";
  Graph fused = parse_graph(text);
  EXPECT_EQ(fuse_elementwise(fused), 2);
  dead_code_elimination(fused);
  int fused_nodes = 0;
  for (const Node& nd : fused.nodes) fused_nodes += nd.op == Op::fused;
  EXPECT_EQ(fused_nodes, 2);
  Executable a(parse_graph(text)), b(std::move(fused));
  auto x = iota(37 * 301, -5000.0f), bias = iota(301, -150.0f), col = iota(37, -18.0f), y = iota(37 * 301, -3000.0f);
  for (auto& v : x) v = std::sin(v) * 2.0f;
  for (auto& v : y) v = std::cos(v * 0.7f);
  for (auto& v : bias) v *= 0.01f;
  x[5] = NAN;
  y[77] = INFINITY;
  x[1000] = -INFINITY;
  std::vector<InTensor> ins{{x.data(), DType::f32, {37, 301}}, {bias.data(), DType::f32, {301}},
                            {col.data(), DType::f32, {37, 1}}, {y.data(), DType::f32, {37, 301}}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto ra = a.run(ins, {}), rb = b.run(ins, {});
    for (int o = 0; o < 2; ++o)
      for (int i = 0; i < 37 * 301; ++i) {
        float u = f(ra[size_t(o)])[i], w = f(rb[size_t(o)])[i];
        if (std::isnan(u)) EXPECT_TRUE(std::isnan(w)) << o << " " << i;
        else EXPECT_EQ(u, w) << o << " " << i;
      }
  }
  set_num_threads(2);
}

TEST(Runtime, FusedShortRowsMatchSeparateOps) {
  // A batch-norm backward's shape of chain: per-channel statistics [1, C, 1, 1] and a
  // per-pixel map [N, 1, H, W] broadcast over [N, C, H, W] with H * W = 6, so each row of
  // the output is shorter than a tile and the broadcast inputs are gathered across rows
  // (tiles and thread chunks start mid-row). Fused and unfused give identical values.
  const char* text = R"(graph(%x: f32[13, 67, 2, 3], %g: f32[13, 67, 2, 3], %m: f32[1, 67, 1, 1], %s: f32[67, 1, 1], %p: f32[13, 1, 2, 3], %w: f32[67]) {
  %k: f32[] = constant() {dtype=[0], shape=[]} data=0000003f
  %d: f32[13, 67, 2, 3] = sub(%x, %m)
  %h: f32[13, 67, 2, 3] = mul(%d, %s)
  %a: f32[13, 67, 2, 3] = mul(%h, %p)
  %b: f32[13, 67, 2, 3] = sub(%g, %a)
  %c: f32[13, 67, 2, 3] = mul(%b, %k)
  %e: f32[13, 67, 2, 3] = tanh(%c)
  %o: f32[13, 67, 2, 3] = add(%e, %m)
  return (%o)
})";
  Graph fused = parse_graph(text);
  EXPECT_EQ(fuse_elementwise(fused), 1);
  dead_code_elimination(fused);
  Executable a(parse_graph(text)), b(std::move(fused));
  const size_t n = 13 * 67 * 6;  // 5226: two threads split it mid-row (2613 % 6 = 3)
  auto x = iota(n, -900.0f), g = iota(n, 300.0f), m = iota(67, -30.0f), sc = iota(67, 1.0f), px = iota(13 * 6, -39.0f),
       w = iota(67);
  for (auto& v : x) v = std::sin(v);
  for (auto& v : g) v = std::cos(v * 0.3f);
  for (auto& v : sc) v = 1.0f / v;
  x[7] = NAN;
  std::vector<InTensor> ins{{x.data(), DType::f32, {13, 67, 2, 3}}, {g.data(), DType::f32, {13, 67, 2, 3}},
                            {m.data(), DType::f32, {1, 67, 1, 1}},  {sc.data(), DType::f32, {67, 1, 1}},
                            {px.data(), DType::f32, {13, 1, 2, 3}},  {w.data(), DType::f32, {67}}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto ra = a.run(ins, {}), rb = b.run(ins, {});
    for (size_t i = 0; i < n; ++i) {
      // the reference by hand: the gather is what is under test
      size_t c = (i / 6) % 67, pix = (i / (67 * 6)) * 6 + i % 6;
      float want = std::tanh((g[i] - (x[i] - m[c]) * sc[c] * px[pix]) * 0.5f) + m[c];
      float u = f(ra[0])[i], v = f(rb[0])[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(u) && std::isnan(v)) << i;
      } else {
        EXPECT_EQ(u, v) << i;
        EXPECT_NEAR(v, want, 1e-5f) << i;
      }
    }
  }
  set_num_threads(2);
}

TEST(Runtime, WhereBroadcastsEveryOperand) {
  // where over 4-byte elements (branch-free, each operand full or broadcast) and over
  // 8-byte ones, against the element-by-element definition; 1 and 2 threads.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int mask = 0; mask < 7; ++mask) {  // bit k: operand k is [9, 1, 1] (not all three)
      auto dims = [&](int bit) { return (mask >> bit) & 1 ? std::string("[9, 1, 1]") : std::string("[9, 7, 300]"); };
      for (const char* dt : {"f32", "i64"}) {
        std::string text = "graph(%c: b8" + dims(0) + ", %a: " + dt + dims(1) + ", %b: " + dt + dims(2) + ") {\n  %o: " +
                           dt + "[9, 7, 300] = where(%c, %a, %b)\n  return (%o)\n}";
        Executable e(parse_graph(text));
        auto size = [&](int bit) { return (mask >> bit) & 1 ? size_t(9) : size_t(9 * 7 * 300); };
        auto shape = [&](int bit) {
          return (mask >> bit) & 1 ? std::vector<int64_t>{9, 1, 1} : std::vector<int64_t>{9, 7, 300};
        };
        std::vector<uint8_t> cond(size(0));
        for (size_t i = 0; i < cond.size(); ++i) cond[i] = uint8_t((i * 7919u) % 3 == 0 ? (i % 5) + 1 : 0);
        bool f32 = dt[0] == 'f';
        std::vector<float> af(size(1)), bf(size(2));
        std::vector<int64_t> ai(size(1)), bi(size(2));
        for (size_t i = 0; i < af.size(); ++i) af[i] = float(i) + 0.5f, ai[i] = int64_t(i) + (int64_t(1) << 40);
        for (size_t i = 0; i < bf.size(); ++i) bf[i] = -float(i), bi[i] = -int64_t(i);
        std::vector<InTensor> ins{{cond.data(), DType::b8, shape(0)},
                                  {f32 ? (void*)af.data() : (void*)ai.data(), f32 ? DType::f32 : DType::i64, shape(1)},
                                  {f32 ? (void*)bf.data() : (void*)bi.data(), f32 ? DType::f32 : DType::i64, shape(2)}};
        auto r = e.run(ins, {});
        for (size_t i = 0; i < size_t(9 * 7 * 300); ++i) {
          size_t row = i / (7 * 300);
          auto at = [&](int bit) { return (mask >> bit) & 1 ? row : i; };
          bool cv = cond[at(0)] != 0;
          if (f32) {
            ASSERT_EQ(f(r[0])[i], cv ? af[at(1)] : bf[at(2)]) << mask << " " << i;
          } else {
            ASSERT_EQ(static_cast<const int64_t*>(r[0].data)[i], cv ? ai[at(1)] : bi[at(2)]) << mask << " " << i;
          }
        }
      }
    }
  }
  set_num_threads(2);
}

TEST(Runtime, ResidualLayerNormMatchesSeparateOps) {
  // layer_norm(x + y) with the add folded into the norm: identical values (the kernel
  // adds as the add kernel does), rows of 37 and 384 (lane tails), 1 and 2 threads.
  for (int64_t n : {37, 384}) {
    std::string d = std::to_string(n);
    std::string text = "graph(%x: f32[9, " + d + "], %y: f32[9, " + d + "], %w: f32[" + d + "], %b: f32[" + d +
                       R"(]) {
  %s: f32[9, )" + d + R"(] = add(%x, %y)
  %o: f32[9, )" + d + R"(] = layer_norm(%s, %w, %b) {eps=f[1e-05], normalized_ndim=[1]}
  return (%o)
})";
    Graph fused = parse_graph(text);
    EXPECT_EQ(fuse_residual_norm(fused), 1);
    dead_code_elimination(fused);
    EXPECT_EQ(fused.nodes.size(), 1u);
    Executable a(parse_graph(text)), b(std::move(fused));
    auto x = iota(size_t(9 * n), -100.0f), y = iota(size_t(9 * n), 40.0f), w = iota(size_t(n), -3.0f),
         bias = iota(size_t(n), 1.0f);
    for (auto& v : x) v = std::sin(v) * 3.0f;
    for (auto& v : y) v = std::cos(v);
    std::vector<InTensor> ins{{x.data(), DType::f32, {9, n}}, {y.data(), DType::f32, {9, n}},
                              {w.data(), DType::f32, {n}}, {bias.data(), DType::f32, {n}}};
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      auto ra = a.run(ins, {}), rb = b.run(ins, {});
      for (int64_t i = 0; i < 9 * n; ++i) EXPECT_EQ(f(ra[0])[i], f(rb[0])[i]) << n << " " << i;
    }
  }
  set_num_threads(2);
}

TEST(Runtime, ConstantWeightsArePackedOnceAndFollowTheirInput) {
  // x[rows, 9] @ w[9, 11] + b with w (row-major, as GPT-2's Conv1D weights) marked
  // constant: packed on the first call with enough rows for the blocked GEMM (not for 2
  // rows, which stream w in place); a weight at a new address is repacked; an in-place
  // change shows after drop_packed(). The same weight as nn.Linear's W^T is never
  // packed: the GEMM reads W's rows in place at every row count.
  Executable exe(parse_graph(R"(graph(%x: f32[s0, 9], %w: f32[9, 11], %b: f32[11]) {
  %y: f32[s0, 11] = addmm(%b, %x, %w)
  return (%y)
})"));
  Executable linear(parse_graph(R"(graph(%x: f32[s0, 9], %w: f32[11, 9], %b: f32[11]) {
  %y: f32[s0, 11] = addmm(%b, %x, %w) {trans_b=[1]}
  return (%y)
})"));
  exe.set_constant_inputs({1});
  linear.set_constant_inputs({1});
  auto bias = iota(11, -5.0f);
  // w_nk: whether w is stored [11, 9] (W, read transposed) or [9, 11].
  auto check_on = [&](Executable& e, const std::vector<float>& w, int64_t rows, bool w_nk, int slot = 0) {
    auto x = iota(size_t(rows * 9), -20.0f);
    for (auto& v : x) v *= 0.01f;
    std::vector<int64_t> wshape = w_nk ? std::vector<int64_t>{11, 9} : std::vector<int64_t>{9, 11};
    auto out = e.run({{x.data(), DType::f32, {rows, 9}}, {w.data(), DType::f32, wshape}, {bias.data(), DType::f32, {11}}},
                     {}, slot);
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t n = 0; n < 11; ++n) {
        double s = bias[size_t(n)];
        for (int64_t k = 0; k < 9; ++k) s += double(x[size_t(m * 9 + k)]) * w[size_t(w_nk ? n * 9 + k : k * 11 + n)];
        ASSERT_NEAR(f(out[0])[size_t(m * 11 + n)], float(s), 1e-4f) << rows << " rows, at " << m << "," << n;
      }
  };
  auto check = [&](const std::vector<float>& w, int64_t rows, int slot = 0) { check_on(exe, w, rows, false, slot); };
  auto w = iota(99, -50.0f);
  for (auto& v : w) v *= 0.02f;
  check(w, 2);
  EXPECT_EQ(exe.packed_bytes(), 0u);
  check(w, 40);
  EXPECT_EQ(exe.packed_bytes(), 99 * sizeof(float));
  EXPECT_TRUE(exe.holds_packed());
  check(w, 40);
  auto w2 = w;
  for (auto& v : w2) v = -v;
  check(w2, 40);  // another address in the same slot: repacked without being told, the old copy gone
  EXPECT_EQ(exe.packed_bytes(), 99 * sizeof(float));
  // Weight slots (two models of one class share a compiled graph and call it in turn):
  // one copy per slot, each kept while the other is used.
  check(w, 40, 1);
  EXPECT_EQ(exe.packed_bytes(), 2 * 99 * sizeof(float));
  for (int i = 0; i < 3; ++i) {
    check(w2, 40, 0);
    check(w, 40, 1);
  }
  EXPECT_EQ(exe.packed_bytes(), 2 * 99 * sizeof(float));
  check(w, 40, Executable::kKeptPerNode - 1);  // the last slot
  EXPECT_EQ(exe.packed_bytes(), 3 * 99 * sizeof(float));
  EXPECT_THROW(check(w, 40, Executable::kKeptPerNode), Error);
  EXPECT_THROW(check(w, 40, -1), Error);
  for (auto& v : w2) v *= 3.0f;
  exe.drop_packed();
  EXPECT_EQ(exe.packed_bytes(), 0u);
  EXPECT_FALSE(exe.holds_packed());
  check(w2, 40);
  for (int64_t rows : {2, 5, 16, 40, 100}) {
    check_on(linear, w, rows, true);
    EXPECT_EQ(linear.packed_bytes(), 0u) << rows;
  }
}

// A drop_packed() that lands while a call is binding its packed weights (after the
// call's unlocked check, before its lock: the test hook puts it there every time) undoes
// every binding the check judged still good: a weight changed in place and then dropped
// is read anew, by that call's successors at least, never from the copy packed before.
TEST(Runtime, DropBetweenBindingCheckAndLockRebindsEveryWeight) {
  Executable exe(parse_graph(R"(graph(%x: f32[s0, 9], %w1: f32[9, 11], %b: f32[11], %w2: f32[11, 7], %c: f32[7]) {
  %y: f32[s0, 11] = addmm(%b, %x, %w1)
  %z: f32[s0, 7] = addmm(%c, %y, %w2)
  return (%z)
})"));
  exe.set_constant_inputs({1, 3});
  const int64_t rows = 40;  // enough rows that both weights are read packed
  auto x = iota(size_t(rows * 9), -20.0f), b = iota(11, -5.0f), c = iota(7, 1.0f);
  for (auto& v : x) v *= 0.01f;
  auto w1 = iota(99, -50.0f), w2a = iota(77, -30.0f);
  for (auto& v : w1) v *= 0.02f;
  for (auto& v : w2a) v *= 0.03f;
  auto w2b = w2a;  // the same values at another address
  auto run = [&](const std::vector<float>& w2) {
    return exe.run({{x.data(), DType::f32, {rows, 9}}, {w1.data(), DType::f32, {9, 11}}, {b.data(), DType::f32, {11}},
                    {w2.data(), DType::f32, {11, 7}}, {c.data(), DType::f32, {7}}},
                   {});
  };
  auto expect_current = [&](const OutTensor& out) {
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t n = 0; n < 7; ++n) {
        double z = c[size_t(n)];
        for (int64_t j = 0; j < 11; ++j) {
          double y = b[size_t(j)];
          for (int64_t k = 0; k < 9; ++k) y += double(x[size_t(m * 9 + k)]) * w1[size_t(k * 11 + j)];
          z += y * w2a[size_t(j * 7 + n)];
        }
        ASSERT_NEAR(f(out)[size_t(m * 7 + n)], float(z), 1e-3f) << m << "," << n;
      }
  };
  expect_current(run(w2a)[0]);
  EXPECT_EQ(exe.packed_bytes(), (99 + 77) * sizeof(float));
  // w2 at a new address sends the next call to the lock; w1's binding looks good to its
  // check. Then, in the window, w1 changes in place and the packed copies are dropped.
  static Executable* target = nullptr;
  static std::vector<float>* changed = nullptr;
  target = &exe;
  changed = &w1;
  struct Unhook {  // a failure below must not leave the hook pointing into this test's frame
    ~Unhook() { test_hooks::bind_packed_before_lock = nullptr; }
  } unhook;
  test_hooks::bind_packed_before_lock = [] {
    test_hooks::bind_packed_before_lock = nullptr;  // once
    for (auto& v : *changed) v = -v;
    target->drop_packed();
  };
  run(w2b);
  EXPECT_EQ(test_hooks::bind_packed_before_lock, nullptr) << "the hook did not run: no binding went stale";
  test_hooks::bind_packed_before_lock = nullptr;
  expect_current(run(w2b)[0]);
  EXPECT_EQ(exe.packed_bytes(), (99 + 77) * sizeof(float));
}

TEST(Runtime, StaticNodesKeepTheirPlanAndPackAcrossSignatures) {
  // A static addmm (constant shapes, its weight constant and packed) beside nodes whose
  // shapes follow s0: every new signature (a decode step's) shares the static node's
  // plan and packed weight, replans only the others, and each call's results hold when
  // the signatures alternate, return, or get a moved weight.
  Executable exe(parse_graph(R"(graph(%x: f32[40, 9], %w: f32[9, 11], %b: f32[11], %z: f32[s0, 11]) {
  %y: f32[40, 11] = addmm(%b, %x, %w)
  %s: f32[s0, 11] = add(%z, %b)
  %c: f32[(s0+40), 11] = cat(%s, %y) {dim=[0], out_size=[(s0+40)]}
  return (%y, %c)
})"));
  exe.set_constant_inputs({1});
  auto x = iota(40 * 9, -100.0f), bias = iota(11, -5.0f), w = iota(99, -50.0f);
  for (auto& v : x) v *= 0.01f;
  for (auto& v : w) v *= 0.02f;
  auto w2 = w;
  for (auto& v : w2) v = -v;
  auto check = [&](const std::vector<float>& wt, int64_t n) {
    auto z = iota(size_t(n * 11), float(n));
    auto out = exe.run({{x.data(), DType::f32, {40, 9}}, {wt.data(), DType::f32, {9, 11}}, {bias.data(), DType::f32, {11}},
                        {z.data(), DType::f32, {n, 11}}},
                       {});
    ASSERT_EQ(out[1].shape, (std::vector<int64_t>{n + 40, 11}));
    for (int64_t m = 0; m < 40; ++m)
      for (int64_t j = 0; j < 11; ++j) {
        double s = bias[size_t(j)];
        for (int64_t k = 0; k < 9; ++k) s += double(x[size_t(m * 9 + k)]) * wt[size_t(k * 11 + j)];
        ASSERT_NEAR(f(out[0])[m * 11 + j], float(s), 1e-4f) << n << " at " << m << "," << j;
        ASSERT_EQ(f(out[1])[(n + m) * 11 + j], f(out[0])[m * 11 + j]) << n << " at " << m << "," << j;
      }
    for (int64_t i = 0; i < n * 11; ++i) ASSERT_EQ(f(out[1])[i], z[size_t(i)] + bias[size_t(i % 11)]) << n << " at " << i;
  };
  for (int64_t n : {1, 5, 1, 7, 8, 9, 5}) {
    check(w, n);
    EXPECT_EQ(exe.packed_bytes(), 99 * sizeof(float)) << n;
  }
  check(w2, 3);  // the weight moved: repacked in place of the old copy
  EXPECT_EQ(exe.packed_bytes(), 99 * sizeof(float));
  check(w2, 1);
  check(w, 4);
  EXPECT_EQ(exe.num_plans(), 7u);
  // A call refused for its weight slot before any plan switch, then calls that switch:
  // nothing of the refused call stays bound.
  auto z = iota(22);
  EXPECT_THROW(exe.run({{x.data(), DType::f32, {40, 9}}, {w.data(), DType::f32, {9, 11}}, {bias.data(), DType::f32, {11}},
                        {z.data(), DType::f32, {2, 11}}},
                       {}, Executable::kKeptPerNode),
               Error);
  check(w, 2);
  check(w, 6);
  // An in-place change shows once the packed copies are dropped, whatever the signature.
  for (auto& v : w) v *= -2.0f;
  exe.drop_packed();
  check(w, 5);
  check(w, 2);
  EXPECT_EQ(exe.packed_bytes(), 99 * sizeof(float));
}

TEST(Runtime, FusedConvBatchNormMatchesSeparateOps) {
  // Odd sizes; an ungrouped conv (GEMM path) and a depthwise one (direct loop), each
  // followed by an inference batch-norm and an activation.
  const char* text = R"(graph(%x: f32[2, 6, 7, 5], %w: f32[6, 6, 3, 3], %dw: f32[6, 1, 3, 3], %b: f32[6], %g: f32[6], %h: f32[6], %m: f32[6], %v: f32[6]) {
  %c: f32[2, 6, 7, 5] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1]}
  %n: f32[2, 6, 7, 5] = batch_norm(%c, %g, %h, %m, %v) {eps=f[0.00001]}
  %r: f32[2, 6, 7, 5] = relu(%n)
  %d: f32[2, 6, 4, 3] = conv2d(%r, %dw, %dw) {stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=[6], has_bias=[0]}
  %e: f32[2, 6, 4, 3] = batch_norm(%d, %g, %h, %m, %v) {eps=f[0.00001]}
  %s: f32[2, 6, 4, 3] = silu(%e)
  return (%s)
})";
  Graph fused = parse_graph(text);
  EXPECT_EQ(fuse_conv_bn(fused), 2);
  EXPECT_EQ(fuse_epilogue(fused), 2);
  dead_code_elimination(fused);
  EXPECT_EQ(fused.nodes.size(), 2u);
  Executable a(parse_graph(text)), b(std::move(fused));
  auto x = iota(2 * 6 * 7 * 5, -100.0f), w = iota(6 * 6 * 9, -150.0f), dw = iota(54, -27.0f);
  auto bias = iota(6, -3.0f), g = iota(6, 0.5f), h = iota(6, -2.0f), m = iota(6, -1.0f), v = iota(6, 0.25f);
  for (auto& t : x) t *= 0.01f;
  for (auto& t : w) t *= 0.01f;
  for (auto& t : dw) t *= 0.05f;
  std::vector<InTensor> ins{{x.data(), DType::f32, {2, 6, 7, 5}}, {w.data(), DType::f32, {6, 6, 3, 3}},
                            {dw.data(), DType::f32, {6, 1, 3, 3}}, {bias.data(), DType::f32, {6}},
                            {g.data(), DType::f32, {6}}, {h.data(), DType::f32, {6}},
                            {m.data(), DType::f32, {6}}, {v.data(), DType::f32, {6}}};
  auto ra = a.run(ins, {}), rb = b.run(ins, {});
  for (int i = 0; i < 2 * 6 * 4 * 3; ++i) EXPECT_NEAR(f(ra[0])[i], f(rb[0])[i], 1e-5f * (1 + std::fabs(f(ra[0])[i])));
}

TEST(Runtime, ConvWithFiltersPackedAsBMatchesReference) {
  // One image, constant filters: convs whose output pixels pad less as the GEMM's rows
  // than as its column panels (conv2d_pixel_rows: 7 x 7 and 4 x 5 maps on AVX-512,
  // 3 x 3 on AVX2) run C^T = columns^T W^T with the filters packed as B; the others as
  // before. Each is checked against a scalar reference with bias, residual and ReLU
  // fused, and against the same graph with the filters not marked constant (unpacked).
  struct Case {
    int64_t C, H, W, OC, k, stride, pad;
  };
  int pixel_rows = 0;
  for (Case t : {Case{19, 7, 7, 40, 1, 1, 0}, Case{8, 14, 13, 33, 1, 2, 0}, Case{5, 13, 13, 17, 3, 2, 1},
                 Case{6, 3, 3, 70, 3, 1, 1}, Case{10, 4, 5, 70, 1, 1, 0}, Case{3, 9, 9, 9, 3, 1, 0},
                 Case{3, 41, 40, 8, 7, 2, 3}}) {  // the last: a stem-like 7x7 / 2 (im2col panels, stride 2)
    int64_t OH = (t.H + 2 * t.pad - t.k) / t.stride + 1, OW = (t.W + 2 * t.pad - t.k) / t.stride + 1;
    pixel_rows += conv2d_pixel_rows(1, 1, OH * OW, false);
    std::string s = "C, H, W, OC, k, OH, OW =";
    for (int64_t v : {t.C, t.H, t.W, t.OC, t.k, OH, OW}) s += " " + std::to_string(v);
    std::string shape_x = "[1, " + std::to_string(t.C) + ", " + std::to_string(t.H) + ", " + std::to_string(t.W) + "]";
    std::string shape_w = "[" + std::to_string(t.OC) + ", " + std::to_string(t.C) + ", " + std::to_string(t.k) + ", " +
                          std::to_string(t.k) + "]";
    std::string shape_o = "[1, " + std::to_string(t.OC) + ", " + std::to_string(OH) + ", " + std::to_string(OW) + "]";
    std::string st = std::to_string(t.stride), pd = std::to_string(t.pad);
    std::string text = "graph(%x: f32" + shape_x + ", %w: f32" + shape_w + ", %b: f32[" + std::to_string(t.OC) +
                       "], %r: f32" + shape_o + ") {\n  %c: f32" + shape_o + " = conv2d(%x, %w, %b, %r) {stride=[" +
                       st + ", " + st + "], padding=[" + pd + ", " + pd +
                       "], dilation=[1, 1], groups=[1], has_bias=[1], has_residual=[1], activation=[1]}\n  return (%c)\n}";
    Executable packed(parse_graph(text)), plain(parse_graph(text));
    packed.set_constant_inputs({1});
    auto x = iota(size_t(t.C * t.H * t.W), -50.0f), w = iota(size_t(t.OC * t.C * t.k * t.k), -70.0f);
    auto b = iota(size_t(t.OC), -3.0f), r = iota(size_t(t.OC * OH * OW), -200.0f);
    for (auto& v : x) v *= 0.013f;
    for (auto& v : w) v = std::sin(v);
    for (auto& v : r) v *= 0.01f;
    std::vector<InTensor> ins{{x.data(), DType::f32, {1, t.C, t.H, t.W}},
                              {w.data(), DType::f32, {t.OC, t.C, t.k, t.k}},
                              {b.data(), DType::f32, {t.OC}},
                              {r.data(), DType::f32, {1, t.OC, OH, OW}}};
    auto got = packed.run(ins, {}), again = packed.run(ins, {}), ref_plain = plain.run(ins, {});
    EXPECT_EQ(packed.packed_bytes(), w.size() * sizeof(float)) << s;
    for (int64_t oc = 0; oc < t.OC; ++oc)
      for (int64_t p = 0; p < OH * OW; ++p) {
        double sum = b[size_t(oc)] + r[size_t(oc * OH * OW + p)];
        for (int64_t ic = 0; ic < t.C; ++ic)
          for (int64_t kh = 0; kh < t.k; ++kh)
            for (int64_t kw = 0; kw < t.k; ++kw) {
              int64_t ih = p / OW * t.stride - t.pad + kh, iw = p % OW * t.stride - t.pad + kw;
              if (ih >= 0 && ih < t.H && iw >= 0 && iw < t.W)
                sum += double(x[size_t((ic * t.H + ih) * t.W + iw)]) * w[size_t(((oc * t.C + ic) * t.k + kh) * t.k + kw)];
            }
        float want = float(std::max(sum, 0.0)), tol = 1e-4f * (1.0f + std::fabs(want));
        size_t i = size_t(oc * OH * OW + p);
        ASSERT_NEAR(f(got[0])[i], want, tol) << s << " at " << oc << "," << p;
        ASSERT_EQ(f(again[0])[i], f(got[0])[i]) << s;
        ASSERT_NEAR(f(ref_plain[0])[i], want, tol) << s;
      }
  }
  EXPECT_GT(pixel_rows, 0) << "no case took the pixels-as-rows path on " << sgemm_isa();
}

TEST(Runtime, ConstantConvFiltersRepackedWhenTheBatchChangesTheirSide) {
  // One image of 7 x 7 (filters packed as B where conv2d_pixel_rows says so), then two
  // images (the batched GEMM: filters as A), then one again: each call repacks for the
  // side its plan reads and matches the reference.
  Executable exe(parse_graph(R"(graph(%x: f32[s0, 19, 7, 7], %w: f32[40, 19, 1, 1]) {
  %c: f32[s0, 40, 7, 7] = conv2d(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  return (%c)
})"));
  exe.set_constant_inputs({1});
  auto w = iota(40 * 19, -300.0f);
  for (auto& v : w) v = std::cos(v);
  for (int64_t n : {1, 2, 1}) {
    auto x = iota(size_t(n * 19 * 49), -100.0f);
    for (auto& v : x) v *= 0.01f;
    auto out = exe.run({{x.data(), DType::f32, {n, 19, 7, 7}}, {w.data(), DType::f32, {40, 19, 1, 1}}}, {});
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < 40; ++oc)
        for (int64_t p = 0; p < 49; ++p) {
          double sum = 0;
          for (int64_t ic = 0; ic < 19; ++ic) sum += double(x[size_t((b * 19 + ic) * 49 + p)]) * w[size_t(oc * 19 + ic)];
          ASSERT_NEAR(f(out[0])[size_t((b * 40 + oc) * 49 + p)], float(sum), 1e-4f * (1 + std::fabs(sum)))
              << n << " images, at " << b << "," << oc << "," << p;
        }
  }
}

TEST(Runtime, ConvWithMalformedFusedNormIsRejected) {
  EXPECT_THROW(Executable(parse_graph(R"(graph(%x: f32[1, 2, 3, 3], %w: f32[4, 2, 1, 1], %g: f32[3]) {
  %c: f32[1, 4, 3, 3] = conv2d(%x, %w, %w, %g, %g, %g, %g) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0], bn_eps=f[0.001]}
  return (%c)
})")), Error);
}

TEST(Runtime, AttentionInProjectionLayoutMatchesPermutedOps) {
  // sdpa reading (B, L, H, E) in place (layout 1) against the permute-copy-permute
  // graph: odd sizes, grouped-query heads (4 query heads on 2 key heads), a float mask
  // in one and causal masking in the other.
  const char* text = R"(graph(%q: f32[2, 7, 4, 5], %k: f32[2, 7, 2, 5], %v: f32[2, 7, 2, 3], %m: f32[1, 1, 7, 7]) {
  %a: f32[2, 4, 7, 5] = permute(%q) {perm=[0, 2, 1, 3]}
  %b: f32[2, 2, 7, 5] = permute(%k) {perm=[0, 2, 1, 3]}
  %c: f32[2, 2, 7, 3] = permute(%v) {perm=[0, 2, 1, 3]}
  %s: f32[2, 4, 7, 3] = sdpa(%a, %b, %c, %m) {has_mask=[1], is_causal=[0], scale=f[0.3]}
  %o: f32[2, 7, 4, 3] = permute(%s) {perm=[0, 2, 1, 3]}
  %t: f32[2, 4, 7, 3] = sdpa(%a, %b, %c, %a) {has_mask=[0], is_causal=[1]}
  %u: f32[2, 7, 4, 3] = permute(%t) {perm=[0, 2, 1, 3]}
  return (%o, %u)
})";
  Graph fused = parse_graph(text);
  EXPECT_EQ(fuse_attention_layout(fused), 2);
  dead_code_elimination(fused);
  EXPECT_EQ(fused.nodes.size(), 2u);
  Executable a(parse_graph(text)), b(std::move(fused));
  auto q = iota(2 * 7 * 4 * 5, -140.0f), k = iota(2 * 7 * 2 * 5, -70.0f), v = iota(2 * 7 * 2 * 3, -40.0f),
       m = iota(49, -24.0f);
  for (auto& t : q) t *= 0.013f;
  for (auto& t : k) t = std::sin(t);
  for (auto& t : m) t *= 0.1f;
  std::vector<InTensor> ins{{q.data(), DType::f32, {2, 7, 4, 5}}, {k.data(), DType::f32, {2, 7, 2, 5}},
                            {v.data(), DType::f32, {2, 7, 2, 3}}, {m.data(), DType::f32, {1, 1, 7, 7}}};
  auto ra = a.run(ins, {}), rb = b.run(ins, {});
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 2 * 7 * 4 * 3; ++i)
      EXPECT_NEAR(f(ra[size_t(o)])[i], f(rb[size_t(o)])[i], 1e-5f * (1 + std::fabs(f(ra[size_t(o)])[i]))) << o << " " << i;
}

TEST(Runtime, GemmHandoffTransposedMatchesRowMajor) {
  // A feed-forward pair with its hand-off transposed (gemm_handoff_transposed) gives what
  // the row-major pair gives, bit for bit: rows of X in whole panels and not, 1 and 2
  // threads; where the hand-off goes as the second GEMM's X^T panels (sgemm_handoff_panels:
  // rows in whole panels, 32 on AVX-512, 16 on AVX2: 64, 96, 288, and 48 on AVX2) and where
  // it goes plainly transposed (5, 33 rows; 48 on AVX-512). H: 100 and 104 (the first
  // GEMM's last W panel short of its tile's rows), 96, 1536 (the second's k in two
  // blocks), 2048 (three, the last shorter), 1024 (W2's rows 4 KiB apart: the short
  // tile), 288 rows in two blocks of X's panels. And addmm's trans_c with a bias per row
  // and column and beta 0.5 (C made whole, then transposed) against the same addmm
  // row-major and a permute.
  const int64_t nr = std::string(sgemm_isa()) == "avx512" ? 32 : 16;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, H] : {std::pair<int64_t, int64_t>{5, 100}, {33, 100}, {64, 100}, {64, 104}, {64, 96}, {48, 96},
                        {96, 1536}, {32, 2048}, {64, 1024}, {288, 96}}) {
      ASSERT_EQ(sgemm_handoff_panels(M, H), M % nr == 0) << M << " rows, " << H;
      const std::string m = std::to_string(M), h = std::to_string(H);
      const std::string text = "graph(%x: f32[" + m + ", 40], %w1: f32[" + h + ", 40], %b1: f32[" + h +
          "], %w2: f32[36, " + h + "], %b2: f32[36], %bb: f32[" + m + ", " + h + "]) {\n"
          "  %h: f32[" + m + ", " + h + "] = addmm(%b1, %x, %w1) {trans_b=[1], activation=gelu}\n"
          "  %r: f32[1, " + m + ", " + h + "] = reshape(%h) {shape=[1, " + m + ", " + h + "]}\n"
          "  %s: f32[" + m + ", " + h + "] = reshape(%r) {shape=[" + m + ", " + h + "]}\n"
          "  %y: f32[" + m + ", 36] = addmm(%b2, %s, %w2) {trans_b=[1]}\n"
          "  %u: f32[" + m + ", " + h + "] = addmm(%bb, %x, %w1) {trans_b=[1], beta=f[0.5]}\n"
          "  %ut: f32[" + h + ", " + m + "] = permute(%u) {perm=[1, 0]}\n"
          "  %v: f32[" + h + ", " + m + "] = addmm(%bb, %x, %w1) {trans_b=[1], beta=f[0.5], trans_c=[1]}\n"
          "  return (%y, %ut, %v)\n}";
      Graph handed = parse_graph(text);
      ASSERT_EQ(gemm_handoff_transposed(handed), 1);
      ASSERT_NE(print_graph(handed).find("panels=[1]"), std::string::npos);  // the kernels decide which
      dead_code_elimination(handed);
      Executable a(parse_graph(text)), b(std::move(handed));
      auto x = iota(size_t(M * 40), -20.0f), w1 = iota(size_t(H * 40), -1000.0f), b1 = iota(size_t(H), -50.0f);
      auto w2 = iota(size_t(36 * H), -1800.0f), b2 = iota(36, -10.0f), bb = iota(size_t(M * H), -7.0f);
      for (auto& t : x) t = std::sin(t);
      for (auto& t : w1) t = 0.1f * std::cos(t);
      for (auto& t : w2) t = 0.1f * std::sin(0.7f * t);
      for (auto& t : bb) t = std::cos(t);
      std::vector<InTensor> ins{{x.data(), DType::f32, {M, 40}},  {w1.data(), DType::f32, {H, 40}},
                                {b1.data(), DType::f32, {H}},     {w2.data(), DType::f32, {36, H}},
                                {b2.data(), DType::f32, {36}},    {bb.data(), DType::f32, {M, H}}};
      auto ra = a.run(ins, {}), rb = b.run(ins, {});
      for (int64_t i = 0; i < M * 36; ++i)
        ASSERT_EQ(std::memcmp(f(ra[0]) + i, f(rb[0]) + i, sizeof(float)), 0) << "M=" << M << " H=" << H << " at " << i;
      for (int64_t i = 0; i < M * H; ++i) ASSERT_EQ(f(ra[1])[i], f(ra[2])[i]) << "M=" << M << " at " << i;
    }
  }
  set_num_threads(1);
}

TEST(Runtime, SymbolicRowsTakeTheSiblingsAndTheHandoff) {
  // Rows of x symbolic (a sequence length): Q, K, V fuse and the feed-forward pair hands
  // over transposed, and every row count then gives what the plain graph gives, bit for
  // bit: 1 and 2 rows (too few for the weight-rows driver: sgemm_parts part by part,
  // sgemm_ct through a transpose, the skinny kernel copying h^T to rows), 5 and 33 (no
  // whole panels), 64 and 96 (panels).
  const std::string text = R"(graph(%x: f32[s0, 40], %wq: f32[24, 40], %wk: f32[13, 40], %wv: f32[100, 40], %bq: f32[24], %bk: f32[13], %bv: f32[100], %w2: f32[36, 100], %b2: f32[36]) {
  %q: f32[s0, 24] = addmm(%bq, %x, %wq) {trans_b=[1]}
  %k: f32[s0, 13] = addmm(%bk, %x, %wk) {trans_b=[1]}
  %v: f32[s0, 100] = addmm(%bv, %x, %wv) {trans_b=[1]}
  %h: f32[s0, 100] = addmm(%bv, %x, %wv) {trans_b=[1], activation=gelu}
  %r: f32[1, s0, 100] = reshape(%h) {shape=[1, s0, 100]}
  %t: f32[s0, 100] = reshape(%r) {shape=[s0, 100]}
  %y: f32[s0, 36] = addmm(%b2, %t, %w2) {trans_b=[1]}
  return (%q, %k, %v, %y)
}
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(fuse_addmm_siblings(g), 1);
  EXPECT_EQ(gemm_handoff_transposed(g), 1);
  dead_code_elimination(g);
  verify(g);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Graph copy = g;
    Executable a(parse_graph(text)), b(std::move(copy));
    for (int64_t M : {1, 2, 5, 33, 64, 96, 1}) {
      auto x = iota(size_t(M * 40), -20.0f), wq = iota(960, -400.0f), wk = iota(520, -200.0f);
      auto wv = iota(4000, -2000.0f), bq = iota(24, -10.0f), bk = iota(13, -6.0f), bv = iota(100, -50.0f);
      auto w2 = iota(3600, -1800.0f), b2 = iota(36, -18.0f);
      for (auto* v : {&x, &wq, &wk, &wv, &w2}) for (auto& t : *v) t = std::sin(0.37f * t);
      std::vector<InTensor> ins{{x.data(), DType::f32, {M, 40}},   {wq.data(), DType::f32, {24, 40}},
                                {wk.data(), DType::f32, {13, 40}},  {wv.data(), DType::f32, {100, 40}},
                                {bq.data(), DType::f32, {24}},      {bk.data(), DType::f32, {13}},
                                {bv.data(), DType::f32, {100}},     {w2.data(), DType::f32, {36, 100}},
                                {b2.data(), DType::f32, {36}}};
      auto ra = a.run(ins, {}), rb = b.run(ins, {});
      const int64_t cols[] = {24, 13, 100, 36};
      for (int k = 0; k < 4; ++k) {
        ASSERT_EQ(rb[size_t(k)].shape, (std::vector<int64_t>{M, cols[k]}));
        for (int64_t i = 0; i < M * cols[k]; ++i)
          ASSERT_EQ(std::memcmp(f(ra[size_t(k)]) + i, f(rb[size_t(k)]) + i, sizeof(float)), 0)
              << "M=" << M << " output " << k << " at " << i;
      }
    }
  }
  set_num_threads(1);
}

TEST(Runtime, AddmmSiblingsMatchSeparateAddmms) {
  // Q, K and V as one addmm_parts (fuse_addmm_siblings) give what the three addmms give,
  // bit for bit: parts of 24, 13 and 100 rows (the weight-rows tile's panels of 12 / 6
  // rows end inside a group of strips and mid-panel), rows of x in whole panels and not,
  // and 2 rows (part by part through the skinny kernels); 1 and 2 threads. Without
  // biases too (an addmm_parts written directly), against matmuls.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t M : {2, 5, 33, 64}) {
      const std::string m = std::to_string(M);
      const std::string text = "graph(%x: f32[" + m + ", 40], %wq: f32[24, 40], %wk: f32[13, 40], "
          "%wv: f32[100, 40], %bq: f32[24], %bk: f32[13], %bv: f32[100]) {\n"
          "  %q: f32[" + m + ", 24] = addmm(%bq, %x, %wq) {trans_b=[1]}\n"
          "  %k: f32[" + m + ", 13] = addmm(%bk, %x, %wk) {trans_b=[1]}\n"
          "  %v: f32[" + m + ", 100] = addmm(%bv, %x, %wv) {trans_b=[1]}\n"
          "  %a: f32[" + m + ", 24] = matmul(%x, %wq) {trans_b=[1]}\n"
          "  %b: f32[" + m + ", 100] = matmul(%x, %wv) {trans_b=[1]}\n"
          "  return (%q, %k, %v, %a, %b)\n}";
      Graph fused = parse_graph(text);
      EXPECT_EQ(fuse_addmm_siblings(fused), M > 4 ? 1 : 0);
      // the bias-free pair as addmm_parts, in place of the matmuls
      std::string nobias = text;
      nobias.replace(nobias.find("  %a:"), nobias.find("  return") - nobias.find("  %a:"),
                     "  %a: f32[" + m + ", 24], %b: f32[" + m + ", 100] = addmm_parts(%x, %wq, %wv) {parts=[2]}\n");
      Executable a(parse_graph(text)), b(std::move(fused)), c(parse_graph(nobias));
      auto x = iota(size_t(M * 40), -20.0f), wq = iota(960, -400.0f), wk = iota(520, -200.0f);
      auto wv = iota(4000, -2000.0f), bq = iota(24, -10.0f), bk = iota(13, -6.0f), bv = iota(100, -50.0f);
      for (auto* v : {&x, &wq, &wk, &wv}) for (auto& t : *v) t = std::sin(0.37f * t);
      std::vector<InTensor> ins{{x.data(), DType::f32, {M, 40}},  {wq.data(), DType::f32, {24, 40}},
                                {wk.data(), DType::f32, {13, 40}}, {wv.data(), DType::f32, {100, 40}},
                                {bq.data(), DType::f32, {24}},     {bk.data(), DType::f32, {13}},
                                {bv.data(), DType::f32, {100}}};
      auto ra = a.run(ins, {}), rb = b.run(ins, {}), rc = c.run(ins, {});
      const int64_t cols[] = {24, 13, 100, 24, 100};
      for (int k = 0; k < 5; ++k)
        for (int64_t i = 0; i < M * cols[k]; ++i) {
          ASSERT_EQ(std::memcmp(f(ra[size_t(k)]) + i, f(rb[size_t(k)]) + i, sizeof(float)), 0)
              << "M=" << M << " output " << k << " at " << i;
          ASSERT_EQ(std::memcmp(f(ra[size_t(k)]) + i, f(rc[size_t(k)]) + i, sizeof(float)), 0)
              << "M=" << M << " output " << k << " at " << i << " (no bias)";
        }
    }
  }
  set_num_threads(1);
}
