// Quantized kernels (kernels/quant*.cc): every format's AVX2 dot kernels against the
// scalar reference over odd shapes, the reference against x @ dequant(w)^T in double
// within the error activation quantization allows, the worst-case codes that would
// saturate maddubs' 16-bit sums if the operand ranges were wrong, qembedding, and the
// ops in the IR (inference, text form, runtime).
#include <gtest/gtest.h>

#include "test_util.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "zenith/error.h"
#include "zenith/ir.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/passes/passes.h"
#include "zenith/runtime.h"
#include "zenith/threadpool.h"
#include "zenith/weight_memory.h"

using namespace zenith;

namespace zenith {
void PrintTo(QFormat f, std::ostream* os) { *os << qformat_info(f).name; }
}  // namespace zenith

namespace {

std::vector<QFormat> all_formats() {
  std::vector<QFormat> r;
#define QFORMAT(name, elems, bytes) r.push_back(QFormat::name);
#include "zenith/quant_formats.def"
#undef QFORMAT
  return r;
}

bool is_kquant(QFormat f) { return f == QFormat::q4_k || f == QFormat::q5_k || f == QFormat::q6_k; }

void put_f16(uint8_t* p, float v) {
  uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Where a block keeps its f16 scales: (offset, is a min). int8's f32 row scale is
// handled apart.
std::vector<std::pair<int, bool>> scale_fields(QFormat f) {
  quant::SmallBlock s = quant::small_block_layout(f);
  if (s.valid) {
    if (s.has_m) return {{0, false}, {2, true}};
    return {{0, false}};
  }
  switch (f) {
    case QFormat::q4_k:
    case QFormat::q5_k: return {{0, false}, {2, true}};
    case QFormat::q6_k: return {{208, false}};
    case QFormat::nf4: return {{0, false}};
    default: return {};
  }
}

// Random bytes for the codes (and the k-quants' sub-block scales) with sane scales: f16
// d in +-[1e-3, 5e-2], mins in [-0.2, 0.2], int8's row scale in [1e-3, 5e-2].
std::vector<uint8_t> random_weight(QFormat f, int64_t N, int64_t K, unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t rb = qformat_row_bytes(f, K);
  std::vector<uint8_t> w(size_t(N * rb));
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> mag(1e-3f, 5e-2f), mins(-0.2f, 0.2f);
  const QFormatInfo& q = qformat_info(f);
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* row = w.data() + n * rb;
    if (f == QFormat::int8) {
      float s = mag(rng);
      std::memcpy(row, &s, 4);
      continue;
    }
    for (int64_t b = 0; b < K / q.block_elems; ++b)
      for (auto [off, is_min] : scale_fields(f))
        put_f16(row + b * q.block_bytes + off, is_min ? mins(rng) : (rng() & 1 ? 1.0f : -1.0f) * mag(rng));
  }
  return w;
}

std::vector<float> dequant(QFormat f, const std::vector<uint8_t>& w, int64_t N, int64_t K) {
  std::vector<float> out(size_t(N * K));
  qdequantize(f, w.data(), N, qformat_row_bytes(f, K), out.data());
  return out;
}

std::vector<float> run_qmatmul(QFormat f, QIsa isa, int64_t M, int64_t N, int64_t K, const std::vector<float>& x,
                               const std::vector<uint8_t>& w, const float* bias) {
  std::vector<float> y(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
  qmatmul(qmatmul_plan(f, M, N, K, isa), x.data(), w.data(), bias, y.data());
  return y;
}

// The scalar reference of the plan `fast`: the same activation codes (its act_max).
std::vector<float> run_reference_of(const QMatmulPlan& fast, const std::vector<float>& x,
                                    const std::vector<uint8_t>& w, const float* bias) {
  QMatmulPlan p = qmatmul_plan(fast.format, fast.M, fast.N, fast.K, QIsa::kScalar, fast.x_scale, false,
                               fast.row_scale != nullptr);
  p.act_max = fast.act_max;
  p.act_group = fast.act_group;  // (AVX2's scale per 64 values)
  std::vector<float> y(size_t(p.M * p.N), std::numeric_limits<float>::quiet_NaN());
  qmatmul(p, x.data(), w.data(), bias, y.data());
  return y;
}

// The sum over k of |wd[n, k]| x |x[m, k]| (wd: a de-quantized weight [N, K]; x: [*, K]):
// the scale of output (m, n)'s float-order error.
double abs_dot(const std::vector<float>& wd, const std::vector<float>& x, int64_t K, int64_t n, int64_t m) {
  double bound = 0;
  for (int64_t k = 0; k < K; ++k) bound += std::fabs(wd[size_t(n * K + k)]) * std::fabs(x[size_t(m * K + k)]);
  return bound;
}

// K values to test for a format: several blocks (int8: any K, tails of 32).
std::vector<int64_t> test_ks(QFormat f) {
  int64_t be = qformat_info(f).block_elems;
  if (be == 0) return {1, 31, 32, 33, 64, 65, 100, 160, 256};
  if (be == 256) return {256, 512, 768};
  return {be, 2 * be, 3 * be, 5 * be, 7 * be, std::max<int64_t>(be, 640 / be * be)};
}

std::string name_of(QFormat f) { return qformat_info(f).name; }

// The SIMD instruction sets this CPU runs: AVX2, AVX-VNNI, AVX-512 VNNI.
std::vector<QIsa> simd_isas() {
  std::vector<QIsa> out;
  for (QIsa isa : {QIsa::kAvx2, QIsa::kAvxVnni, QIsa::kAvx512})
    if (qisa_supported(isa)) out.push_back(isa);
  return out;
}

// Those that have a kernel of their own for `f` (AVX-512 runs the AVX2 kernels of the
// formats it has none for: nothing more to test there).
std::vector<QIsa> simd_isas(QFormat f) {
  std::vector<QIsa> out;
  for (QIsa isa : simd_isas())
    if (isa != QIsa::kAvx512 || quant::avx512_dot_kernels(f)) out.push_back(isa);
  return out;
}

class QuantFormat : public ::testing::TestWithParam<QFormat> {};

}  // namespace

TEST(QuantFormats, TableIsTheContract) {
  struct Row {
    const char* name;
    int64_t elems, bytes;
  };
  const Row expect[] = {{"q8_0", 32, 34},      {"q4_0", 32, 18},        {"q4_1", 32, 20},     {"q5_0", 32, 22},
                        {"q5_1", 32, 24},      {"q4_k", 256, 144},      {"q5_k", 256, 176},   {"q6_k", 256, 210},
                        {"int8", 0, 4},        {"int4_g64", 64, 34},    {"int4_g128", 128, 66}, {"uint4_g64", 64, 36},
                        {"uint4_g128", 128, 68}, {"nf4", 64, 34}};
  ASSERT_EQ(all_formats().size(), std::size(expect));
  for (QFormat f : all_formats()) {
    const Row& r = expect[size_t(f)];
    const QFormatInfo& q = qformat_info(f);
    EXPECT_STREQ(q.name, r.name);
    EXPECT_EQ(q.block_elems, r.elems) << r.name;
    EXPECT_EQ(q.block_bytes, r.bytes) << r.name;
    QFormat back;
    ASSERT_TRUE(parse_qformat(r.name, &back));
    EXPECT_EQ(back, f);
  }
  QFormat dummy;
  EXPECT_FALSE(parse_qformat("q3_k", &dummy));
  EXPECT_EQ(qformat_row_elems(QFormat::q8_0, 68), 64);
  EXPECT_EQ(qformat_row_elems(QFormat::q8_0, 67), -1);
  EXPECT_EQ(qformat_row_elems(QFormat::int8, 4), 0);
  EXPECT_EQ(qformat_row_elems(QFormat::int8, 3), -1);
  EXPECT_EQ(qformat_row_bytes(QFormat::q6_k, 512), 420);
  EXPECT_EQ(qformat_row_bytes(QFormat::q6_k, 640), -1);
  EXPECT_EQ(qformat_row_bytes(QFormat::int8, 7), 11);
}

// The activation quantizer: codes within [-127, 127], the largest |x| of a block maps
// to +-127, the sums per 16 add up, and the error per value is at most half a step.
TEST(QuantKernels, ActivationQuantizerBoundsAndSums) {
  for (int64_t block : {32, 256})
    for (int64_t K : {256, 512}) {
      auto x = randn(size_t(K), unsigned(K + block));
      x[3] = 1e3f;  // one outlier: its block's step is large
      const int64_t nd = K / block;
      std::vector<int8_t> q(static_cast<size_t>(K));
      std::vector<float> d(static_cast<size_t>(nd));
      std::vector<int16_t> s(size_t(K / 16));
      quant::quantize_act_row(x.data(), K, block, q.data(), d.data(), s.data());
      for (int64_t b = 0; b < nd; ++b) {
        int best = 0;
        for (int64_t k = b * block; k < (b + 1) * block; ++k) {
          ASSERT_GE(q[size_t(k)], -127);
          ASSERT_LE(q[size_t(k)], 127);
          best = std::max(best, std::abs(int(q[size_t(k)])));
          EXPECT_LE(std::fabs(x[size_t(k)] - d[size_t(b)] * q[size_t(k)]), d[size_t(b)] * 0.5001f);
        }
        EXPECT_EQ(best, 127);
      }
      for (int64_t g = 0; g < K / 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += q[size_t(16 * g + i)];
        EXPECT_EQ(s[size_t(g)], sum);
      }
    }
}

// The default ISA is the widest the CPU reports (read here from the CPU's own flags),
// less what the environment holds back.
TEST(QuantKernels, DefaultIsaIsTheWidestAllowed) {
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool vnni = avx2 && __builtin_cpu_supports("avxvnni");
  const bool v512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  const bool avx2 = false, vnni = false, v512 = false;
#endif
  const bool no512 = std::getenv("ZENITH_NO_AVX512"), novnni = std::getenv("ZENITH_NO_AVXVNNI");
  const char* want = !no512 && v512 ? "avx512vnni" : !novnni && vnni ? "avxvnni" : avx2 ? "avx2" : "scalar";
  EXPECT_EQ(std::string(qisa_name(qisa_default())), want);
  EXPECT_EQ(qisa_supported(QIsa::kAvxVnni), vnni);
}

namespace {
// The SIMD quantizers this CPU runs (AVX2's, AVX-512's), by name.
std::vector<std::pair<const char*, quant::QuantizeActFn>> simd_quantizers() {
  std::vector<std::pair<const char*, quant::QuantizeActFn>> out;
  if (qisa_supported(QIsa::kAvx2)) out.emplace_back("avx2", quant::quantize_act_row_avx2);
  if (qisa_supported(QIsa::kAvx512)) out.emplace_back("avx512", quant::quantize_act_row_avx512);
  return out;
}
}  // namespace

// The SIMD quantizers equal the reference value for value: blocks of 32 and 256, short
// last blocks (int8 rows), zeros, tiny values, inf and NaN, a given scale and none.
TEST(QuantKernels, SimdActivationQuantizersEqualReference) {
  if (simd_quantizers().empty()) GTEST_SKIP() << "this CPU has no AVX2";
  unsigned seed = 5;
  for (int64_t block : {32, 256})
    for (int64_t K : {32, 256, 512, 1, 33, 100, 287}) {
      if (block == 256 && K % 256) continue;
      const int64_t kpad = (K + 31) / 32 * 32, nd = (kpad + block - 1) / block;
      for (int variant = 0; variant < 9; ++variant) {
        auto x = randn(size_t(K), seed++);
        if (variant % 4 == 1) std::fill(x.begin(), x.begin() + std::min<int64_t>(K, 32), 0.0f);
        if (variant % 4 == 2) x[0] = std::numeric_limits<float>::infinity(), x[size_t(K - 1)] = NAN;
        if (variant % 4 == 3)
          for (auto& v : x) v *= 1e-38f;  // 127 / max overflows: zeros
        if (variant >= 4 && variant < 8) x[size_t(K / 2)] *= 40.0f;  // clipped on the given scale
        // 8: a NaN scale, which is no scale (the reference's scale > 0 test), as 0 is
        const float scale = variant == 8 ? std::numeric_limits<float>::quiet_NaN() : variant >= 4 ? 0.02f : 0.0f;
        std::vector<int8_t> q1(static_cast<size_t>(kpad), 9);
        std::vector<float> d1(static_cast<size_t>(nd));
        std::vector<int16_t> s1(static_cast<size_t>(kpad / 16));
        quant::quantize_act_row(x.data(), K, block, q1.data(), d1.data(), s1.data(), scale);
        for (const auto& [name, fn] : simd_quantizers()) {
          std::vector<int8_t> q2(static_cast<size_t>(kpad), 9);
          std::vector<float> d2(static_cast<size_t>(nd));
          std::vector<int16_t> s2(static_cast<size_t>(kpad / 16));
          fn(x.data(), K, block, q2.data(), d2.data(), s2.data(), scale, 127);
          ASSERT_EQ(q1, q2) << name << " K " << K << " block " << block << " variant " << variant;
          ASSERT_EQ(s1, s2) << name << " K " << K << " block " << block << " variant " << variant;
          for (size_t i = 0; i < d1.size(); ++i)
            ASSERT_TRUE(d1[i] == d2[i] || (std::isnan(d1[i]) && std::isnan(d2[i]))) << name << " " << K << " " << block;
        }
      }
    }
}

// A static scale (qmatmul's x_scale): every block's scale is it, codes round(x / s)
// clamped to [-127, 127], a block with inf or NaN a NaN scale; AVX2 and AVX-512 equal to
// the reference.
TEST(QuantKernels, StaticActivationScale) {
  const float s = 0.02f;
  for (int64_t K : {32, 100, 287}) {
    const int64_t kpad = (K + 31) / 32 * 32, nd = kpad / 32;
    auto x = randn(size_t(K), unsigned(K));
    x[1] = 50.0f;  // clips
    if (K == 100) x[40] = NAN;  // block 1
    std::vector<int8_t> q1(static_cast<size_t>(kpad)), q2(static_cast<size_t>(kpad));
    std::vector<float> d1(static_cast<size_t>(nd)), d2(static_cast<size_t>(nd));
    std::vector<int16_t> s1(static_cast<size_t>(kpad / 16)), s2(static_cast<size_t>(kpad / 16));
    quant::quantize_act_row(x.data(), K, 32, q1.data(), d1.data(), s1.data(), s);
    for (int64_t b = 0; b < nd; ++b) {
      const bool bad = K == 100 && b == 1;
      if (bad) {
        ASSERT_TRUE(std::isnan(d1[size_t(b)]));
        continue;
      }
      ASSERT_EQ(d1[size_t(b)], s);
      for (int64_t k = 32 * b; k < std::min(K, 32 * b + 32); ++k)
        ASSERT_EQ(q1[size_t(k)], int8_t(std::max(-127.0f, std::min(127.0f, std::nearbyint(x[size_t(k)] * (1.0f / s))))))
            << k;
    }
    EXPECT_EQ(q1[1], 127);
    for (const auto& [name, fn] : simd_quantizers()) {
      fn(x.data(), K, 32, q2.data(), d2.data(), s2.data(), s, 127);
      ASSERT_EQ(q1, q2) << name << " " << K;
      ASSERT_EQ(s1, s2) << name << " " << K;
      for (size_t i = 0; i < d1.size(); ++i) ASSERT_TRUE(d1[i] == d2[i] || (std::isnan(d1[i]) && std::isnan(d2[i])));
    }
  }
}

// One activation scale per row (dynamic INT8 per row): max|x| / qmax, NaN left out, 1 for
// a row of zeros, one so small the division underflows, or one holding inf; AVX-512
// equal to the reference bit for bit, over K below, at and past its 32-float steps.
TEST(QuantKernels, ActivationRowScale) {
  for (int64_t K : {1, 7, 16, 33, 40, 48, 100, 768}) {
    // plain; a NaN; an inf; zeros; the max in the tail; denormal values (max|x| / 63 is 0);
    // the max first and a NaN in its lane of the last step (no later step to undo a
    // max that let the NaN in)
    for (int kind = 0; kind < 7; ++kind) {
      auto x = randn(size_t(K), unsigned(K * 7 + kind));
      if (kind == 1) x[size_t(K / 2)] = NAN;  // left out: the scale is the other values'
      if (kind == 2) x[size_t(K / 2)] = -INFINITY;
      if (kind == 3) std::fill(x.begin(), x.end(), 0.0f);
      if (kind == 4) x[size_t(K - 1)] = -40.0f;
      if (kind == 5)
        for (float& v : x) v = v > 0 ? 1e-45f : -1e-45f;  // the smallest denormal
      if (kind == 6) {
        x[0] = -40.0f;
        x[size_t(32 * ((K - 1) / 32))] = NAN;  // lane 0 of the last 32-float step (x[0] itself when K <= 32)
      }
      float amax = 0.0f;
      for (float v : x)
        if (!std::isnan(v)) amax = std::max(amax, std::fabs(v));
      // a row of zeros (or nothing but the NaN), of denormals, or one with inf: 1
      const float want = amax / 63.0f > 0.0f && std::isfinite(amax) ? amax / 63.0f : 1.0f;
      if (kind == 5) ASSERT_EQ(want, 1.0f);
      const float ref = quant::act_row_scale(x.data(), K, 63);
      ASSERT_EQ(ref, want) << "K=" << K << " kind " << kind;
      if (qisa_supported(QIsa::kAvx512)) ASSERT_EQ(quant::act_row_scale_avx512(x.data(), K, 63), ref) << K << " " << kind;
    }
  }
}

// qmatmul with one activation scale per row: honoured on AVX-512 VNNI and the scalar
// reference, a scale per block on AVX2 (64 values from 8 rows: act_group) and AVX-VNNI
// (32) (QMatmulPlan::row_scale). The
// packed int8 GEMM (the uniform tiles: remainders of 1 and 6 rows past 12) and the dot
// kernels equal the scalar reference on the same codes up to float order; a row with a
// NaN is NaN throughout, a row of zeros is the bias; int8 weights only, never with a
// static scale.
TEST(QuantKernels, Int8GemmRowScaleMatchesScalarReference) {
  unsigned seed = 700;
  for (QIsa isa : simd_isas())
    for (int64_t K : {33, 100, 768})
      for (int64_t M : {5, 13, 21, 23, 30}) {  // 12-row tiles and remainders of 1, 9, 11 and 6
        const int64_t N = 70;
        auto w = random_weight(QFormat::int8, N, K, seed++);
        auto x = randn(size_t(M * K), seed++);
        for (int64_t k = 0; k < K; ++k) x[size_t(K + k)] *= 1 + 0.1f * float(k);  // row 1: a wide range
        x[size_t(3 * K + K / 3)] = NAN;                                             // row 3
        std::fill_n(x.begin() + 4 * K, K, 0.0f);                                    // row 4
        auto bias = randn(size_t(N), seed++);
        const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa, 0.0f, false, true);
        ASSERT_EQ(plan.row_scale != nullptr, isa == QIsa::kAvx512) << qisa_name(isa);
        const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
        std::vector<float> fast(size_t(M * N)), dots(size_t(M * N));
        qmatmul(plan, x.data(), w.data(), bias.data(), fast.data(), &packed);
        qmatmul(plan, x.data(), w.data(), bias.data(), dots.data());
        const auto ref = run_reference_of(plan, x, w, bias.data());
        const auto wd = dequant(QFormat::int8, w, N, K);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const size_t i = size_t(m * N + n);
            if (m == 3) {
              ASSERT_TRUE(std::isnan(fast[i]) && std::isnan(dots[i])) << qisa_name(isa) << " K=" << K << " n=" << n;
              continue;
            }
            if (m == 4) {
              ASSERT_EQ(fast[i], bias[size_t(n)]);
              ASSERT_EQ(dots[i], bias[size_t(n)]);
              continue;
            }
            const double bound = abs_dot(wd, x, K, n, m);
            ASSERT_NEAR(fast[i], ref[i], 1e-5 * bound + 1e-6) << qisa_name(isa) << " K=" << K << " at " << m << "," << n;
            ASSERT_NEAR(dots[i], ref[i], 1e-5 * bound + 1e-6) << qisa_name(isa) << " K=" << K << " at " << m << "," << n;
          }
      }
  // The scalar plan quantizes each row on one scale, as an independent loop does: codes
  // round(x * (1 / s)) with s = max|x| / 127, times the weight's dequantized values.
  const int64_t K = 100, N = 3, M = 2;
  const QMatmulPlan sp = qmatmul_plan(QFormat::int8, M, N, K, QIsa::kScalar, 0.0f, false, true);
  ASSERT_NE(sp.row_scale, nullptr);
  const auto w = random_weight(QFormat::int8, N, K, 7);
  auto x = randn(size_t(M * K), 8);
  for (int64_t k = 0; k < K; ++k) x[size_t(k)] *= float(k + 1);  // row 0: values far apart
  const auto wd = dequant(QFormat::int8, w, N, K);
  std::vector<float> y(size_t(M * N));
  qmatmul(sp, x.data(), w.data(), nullptr, y.data());
  for (int64_t m = 0; m < M; ++m) {
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[size_t(m * K + k)]));
    const float s = amax / 127.0f;
    for (int64_t n = 0; n < N; ++n) {
      double want = 0, bound = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float code = std::max(-127.0f, std::min(127.0f, std::nearbyint(x[size_t(m * K + k)] * (1.0f / s))));
        want += double(code) * s * wd[size_t(n * K + k)];
        bound += std::fabs(wd[size_t(n * K + k)]) * std::fabs(x[size_t(m * K + k)]);
      }
      ASSERT_NEAR(y[size_t(m * N + n)], want, 1e-5 * bound + 1e-6) << m << "," << n;
    }
  }
  EXPECT_THROW(qmatmul_plan(QFormat::q8_0, 8, 8, 64, QIsa::kScalar, 0.0f, false, true), Error);
  EXPECT_THROW(qmatmul_plan(QFormat::int8, 8, 8, 64, QIsa::kScalar, 0.02f, false, true), Error);
}

// The AVX-512 zero sums equal the reference's: one and several 64-code steps, a last 32.
TEST(QuantKernels, Avx512ZeroSumsEqualReference) {
  if (!qisa_supported(QIsa::kAvx512)) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  for (int zero : {8, 128})
  for (int64_t kpad : {32, 64, 96, 640, 5632}) {
    std::vector<int8_t> q(static_cast<size_t>(kpad));
    for (int64_t k = 0; k < kpad; ++k) q[size_t(k)] = int8_t(k % 3 == 0 ? -127 : (k * 37) % 255 - 127);
    std::vector<int32_t> a(size_t(kpad / 4)), b(size_t(kpad / 4), 99);
    quant::zero_sums(q.data(), kpad, zero, a.data());
    quant::zero_sums_avx512(q.data(), kpad, zero, b.data());
    ASSERT_EQ(a, b) << "zero " << zero << " kpad " << kpad;
  }
}

// AVX2, AVX-VNNI and AVX-512 against the scalar reference: rows M (every tile size 1-4,
// remainders, more than a tile), weight rows N, K of several blocks (odd counts of 32,
// for AVX-512's chunk pairs), with and without bias, on one and two threads. The integer
// parts are equal by construction; the k-quants' float arithmetic is too (bit-exact),
// the others' float sums differ in order only.
TEST_P(QuantFormat, SimdMatchesScalarReference) {
  const QFormat f = GetParam();
  if (simd_isas(f).empty()) GTEST_SKIP() << "this CPU has no AVX2";
  unsigned seed = 1;
  for (QIsa isa : simd_isas(f))
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t K : test_ks(f))
      for (int64_t M : {1, 2, 3, 5, 8, 17})
        for (int64_t N : {1, 7, 13, 33}) {  // the 4-bit kernels' 8-row groups, with 5 and 1 rows left
          auto w = random_weight(f, N, K, seed++);
          auto x = randn(size_t(M * K), seed++);
          auto bias = randn(size_t(N), seed++);
          const float* b = (M + N) % 2 ? bias.data() : nullptr;
          auto fast = run_qmatmul(f, isa, M, N, K, x, w, b);
          auto ref = run_reference_of(qmatmul_plan(f, M, N, K, isa), x, w, b);
          auto wd = dequant(f, w, N, K);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              const size_t i = size_t(m * N + n);
              if (is_kquant(f)) {
                ASSERT_EQ(fast[i], ref[i]) << name_of(f) << " M=" << M << " N=" << N << " K=" << K;
                continue;
              }
              // float sums in another order: a bound on their rounding, from the
              // largest weight of the row and the row of x
              double wmax = 0, xsum = 0;
              for (int64_t k = 0; k < K; ++k) {
                wmax = std::max(wmax, double(std::fabs(wd[size_t(n * K + k)])));
                xsum += std::fabs(x[size_t(m * K + k)]);
              }
              ASSERT_NEAR(fast[i], ref[i], 1e-5 * wmax * xsum + 1e-6)
                  << name_of(f) << " " << qisa_name(isa) << " M=" << M << " N=" << N << " K=" << K << " at " << m << "," << n;
            }
        }
  }
  set_num_threads(1);
}

// int8 weights against one row of x (decode) go 4 weight rows at a time on AVX2; each
// row's sum must be the one-row kernel's bit for bit (the same chunks, the same order):
// every weight row alone against the same rows in one call, remainders of 1-3 rows, K
// with and without a tail past the last 32, on one and two threads; 33 rows of K 2053 are
// past the kernels' prefetch threshold (kRowPrefetchMinBytes), the others under it.
TEST(QuantKernels, Int8DecodeRowsTogetherEqualEachAlone) {
  if (simd_isas(QFormat::int8).empty()) GTEST_SKIP() << "this CPU has no AVX2";
  unsigned seed = 7;
  const int64_t header = 4;  // a row: its f32 scale, then its K codes
  for (QIsa isa : simd_isas(QFormat::int8))
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (int64_t K : {31, 32, 64, 100, 2053})
        for (int64_t N : {4, 5, 6, 7, 13, 33}) {
          auto w = random_weight(QFormat::int8, N, K, seed++);
          auto x = randn(size_t(K), seed++);
          auto all = run_qmatmul(QFormat::int8, isa, 1, N, K, x, w, nullptr);
          for (int64_t n = 0; n < N; ++n) {
            std::vector<uint8_t> row(w.begin() + n * (header + K), w.begin() + (n + 1) * (header + K));
            auto one = run_qmatmul(QFormat::int8, isa, 1, 1, K, x, row, nullptr);
            ASSERT_EQ(all[size_t(n)], one[0]) << qisa_name(isa) << " threads " << threads << " K=" << K << " N=" << N
                                              << " row " << n;
          }
        }
    }
  set_num_threads(1);
}

// The reference against x @ dequant(w)^T in double. Quantizing x moves each value by
// at most half its block's step d_x = max|x_block| / 127, so |y - y_exact| <=
// sum_k |w_k| d_x(k) / 2, plus float rounding (1e-5 of sum |w x|). nf4 reads x itself.
TEST_P(QuantFormat, ReferenceMatchesDequantizedMatmulWithinActivationError) {
  const QFormat f = GetParam();
  const int64_t M = 3, N = 5;
  unsigned seed = 100;
  const int64_t ablock = quant::act_block(quant::act_kind(f));
  for (int64_t K : test_ks(f)) {
    auto w = random_weight(f, N, K, seed++);
    auto x = randn(size_t(M * K), seed++);
    auto y = run_qmatmul(f, QIsa::kScalar, M, N, K, x, w, nullptr);
    auto wd = dequant(f, w, N, K);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0, bound = 0, mag = 0;
        for (int64_t b0 = 0; b0 < K; b0 += ablock) {
          double amax = 0;
          for (int64_t k = b0; k < std::min(K, b0 + ablock); ++k) amax = std::max(amax, double(std::fabs(x[size_t(m * K + k)])));
          for (int64_t k = b0; k < std::min(K, b0 + ablock); ++k) {
            const double wk = wd[size_t(n * K + k)], xk = x[size_t(m * K + k)];
            exact += wk * xk;
            mag += std::fabs(wk * xk);
            if (quant::act_kind(f) != quant::ActKind::kF32) bound += std::fabs(wk) * amax / 127 / 2;
          }
        }
        ASSERT_NEAR(y[size_t(m * N + n)], exact, bound * 1.001 + 1e-5 * mag + 1e-6)
            << name_of(f) << " K=" << K << " at " << m << "," << n;
      }
  }
}

// The codes and scales at their extremes against activations of +-127 (x = +-127, so
// d_x = 1 exactly), with unit weight scales: every product and sum is an integer the
// floats hold exactly, so the AVX2 result must equal the exact dot product computed in
// int64 from the dequantized weights. A saturated 16-bit pair sum (maddubs) would be off
// by at least 1. Signed codes at -128 (q8_0, int8) against -127 give the largest pair,
// 2 x 128 x 127 = 32512. int8 runs the packed int8 GEMM tiles too.
TEST_P(QuantFormat, WorstCaseCodesDoNotSaturate) {
  const QFormat f = GetParam();
  if (simd_isas(f).empty()) GTEST_SKIP() << "this CPU has no AVX2";
  const int64_t K = qformat_info(f).block_elems == 0 ? 96 : std::max<int64_t>(256, qformat_info(f).block_elems);
  const int64_t rb = qformat_row_bytes(f, K);
  // Weight rows: every code byte 0x00, 0xFF, 0x80, 0x7F (with k-quant sub-block scale
  // bytes the same), then unit scales written over them.
  // 9 rows: the one-row kernels of the 4-bit formats take 8 weight rows at a time.
  const uint8_t fills[] = {0x00, 0xFF, 0x80, 0x7F};
  const int64_t N = 9;
  std::vector<uint8_t> w(size_t(N * rb));
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* row = w.data() + n * rb;
    std::memset(row, fills[n % 4], size_t(rb));
    if (f == QFormat::int8) {
      float one = 1.0f;
      std::memcpy(row, &one, 4);
      continue;
    }
    const QFormatInfo& q = qformat_info(f);
    // The 4-bit formats' rows n and n + 4 (same fill) apart by their scales 1, 2, 4, so a
    // mix-up of rows in the 8-row kernels shows; their sums stay exact in float.
    const float unit = quant::avx2_weight_rows(f) > 1 ? float(1 << (n / 4)) : 1.0f;
    for (int64_t b = 0; b < K / q.block_elems; ++b)
      for (auto [off, is_min] : scale_fields(f)) put_f16(row + b * q.block_bytes + off, (is_min ? -1.0f : 1.0f) * unit);
  }
  // Activations: all +127, all -127, alternating, alternating in pairs, +127 then -127 per 16.
  const int64_t M = 5;
  std::vector<float> x(size_t(M * K));
  for (int64_t k = 0; k < K; ++k) {
    x[size_t(k)] = 127;
    x[size_t(K + k)] = -127;
    x[size_t(2 * K + k)] = k % 2 ? -127 : 127;
    x[size_t(3 * K + k)] = (k / 2) % 2 ? -127 : 127;
    x[size_t(4 * K + k)] = k % 32 < 16 ? 127 : -127;  // a nibble block's low and high halves apart
  }
  auto ref = run_qmatmul(f, QIsa::kScalar, M, N, K, x, w, nullptr);
  auto wd = dequant(f, w, N, K);
  // the dot kernels (4 rows of x), the packed int8 GEMM, one row of x at a time, and the
  // 4-bit lanes GEMM (the 5 rows repeated)
  enum Run { kDots, kGemm, kOneRow, kLanes };
  std::vector<std::pair<QIsa, Run>> runs;
  for (QIsa isa : simd_isas(f)) {
    runs.push_back({isa, kDots});
    runs.push_back({isa, kOneRow});
    if (f == QFormat::int8) runs.push_back({isa, kGemm});
    if (quant::lanes_format(f)) runs.push_back({isa, kLanes});
  }
  for (auto [isa, run] : runs) {
    const bool gemm = run == kGemm;
    auto fast = run_qmatmul(f, isa, M, N, K, x, w, nullptr);
    if (gemm) {  // over NaN, so a value the GEMM does not write fails
      std::fill(fast.begin(), fast.end(), std::numeric_limits<float>::quiet_NaN());
      const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
      qmatmul(qmatmul_plan(f, M, N, K, isa), x.data(), w.data(), nullptr, fast.data(), &packed);
    }
    if (run == kLanes) {  // the M rows repeated past the first row count the lanes take
      const int64_t reps = lane_min_rows(isa) / M + 2;
      std::vector<float> xr;
      for (int64_t i = 0; i < reps; ++i) xr.insert(xr.end(), x.begin(), x.end());
      ASSERT_TRUE(qmatmul_plan(f, reps * M, N, K, isa).lanes != nullptr);
      const auto yr = run_qmatmul(f, isa, reps * M, N, K, xr, w, nullptr);
      for (int64_t i = 0; i < reps; ++i)
        ASSERT_TRUE(std::equal(yr.begin() + i * M * N, yr.begin() + (i + 1) * M * N, ref.begin()));
      std::copy(yr.begin(), yr.begin() + M * N, fast.begin());
    }
    if (run == kOneRow) {
      for (int64_t m = 0; m < M; ++m) {
        const std::vector<float> xm(x.begin() + m * K, x.begin() + (m + 1) * K);
        const auto ym = run_qmatmul(f, isa, 1, N, K, xm, w, nullptr);
        std::copy(ym.begin(), ym.end(), fast.begin() + m * N);
      }
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0;
        for (int64_t k = 0; k < K; ++k) exact += double(wd[size_t(n * K + k)]) * x[size_t(m * K + k)];
        const size_t i = size_t(m * N + n);
        if (f == QFormat::nf4) {  // float levels: only rounding
          EXPECT_NEAR(fast[i], exact, 1e-5 * std::fabs(exact) + 1e-3) << name_of(f);
          continue;
        }
        // Sums past 2^24 (k-quant super-blocks) are rounded once to float: half an ulp.
        const double ulp = std::max(1.0, std::ldexp(1.0, std::ilogb(std::fabs(exact) + 1) - 23));
        EXPECT_LE(std::fabs(fast[i] - exact), ulp) << name_of(f) << " fill " << int(fills[n % 4]) << " x pattern "
                                                   << m << ": " << fast[i] << " vs exact " << exact;
        EXPECT_EQ(fast[i], ref[i]) << name_of(f) << " " << qisa_name(isa) << " run " << int(run) << " fill "
                                   << int(fills[n % 4]) << " x pattern " << m;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(All, QuantFormat, ::testing::ValuesIn(all_formats()),
                         [](const ::testing::TestParamInfo<QFormat>& p) { return name_of(p.param); });

// The 4-bit lanes GEMM (lane_min_rows or more rows of x; 16 rows per register on AVX-512
// VNNI, 8 on AVX2 and AVX-VNNI): its weight unpacking against the scalar reference and the
// dequantized weight, and on every SIMD ISA every output equal to ref_dot's bit for bit
// (the same integer sums, scaled and added in the same order): rows that fill the lanes
// and rows that leave some empty, columns past the last group, a bias, two threads, and
// rows enough at K 4096 for two sweeps over the weight; then a fused GELU (the epilogue
// that runs over each thread's whole columns once a sweep is done).
TEST(QuantKernels, LanesGemmEqualsReferenceBitForBit) {
  if (simd_isas().empty()) GTEST_SKIP() << "this CPU has no AVX2";
  unsigned seed = 900;
  for (QFormat f : {QFormat::q4_0, QFormat::int4_g64, QFormat::int4_g128}) {
    // the unpacking, 5 rows into a group of 8 (the rest zero)
    const int64_t K = 384, rb = qformat_row_bytes(f, K);
    auto w = random_weight(f, 5, K, seed++);
    std::vector<uint8_t> c0(8 * K, 7), c1(8 * K, 9);
    std::vector<float> s0(8 * K / 32, 7.0f), s1(8 * K / 32, 9.0f);
    quant::lane_unpack(f, w.data(), rb, 5, 8, K, c0.data(), s0.data());
    quant::lane_unpack_avx2(f, w.data(), rb, 5, 8, K, c1.data(), s1.data());
    EXPECT_EQ(c0, c1) << name_of(f);
    EXPECT_EQ(0, std::memcmp(s0.data(), s1.data(), s0.size() * sizeof(float))) << name_of(f);
    auto wd = dequant(f, w, 5, K);
    for (int64_t n = 0; n < 5; ++n)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(wd[size_t(n * K + k)], s0[size_t(n * K / 32 + k / 32)] * float(int(c0[size_t(n * K + k)]) - 8));
    EXPECT_TRUE(std::all_of(c0.begin() + 5 * K, c0.end(), [](uint8_t v) { return v == 0; }));
  }
  for (QIsa isa : simd_isas())
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (QFormat f : {QFormat::q4_0, QFormat::int4_g64, QFormat::int4_g128})
        for (auto [m, N, K] : {std::array<int64_t, 3>{0, 8, 128}, {8, 8, 128}, {9, 13, 256}, {23, 33, 384},
                               {32, 1, 640}, {40, 21, 1024}, {92, 9, 4096}}) {
          const int64_t M = lane_min_rows(isa) + m;  // from the first row count the lanes take
          const QMatmulPlan p = qmatmul_plan(f, M, N, K, isa);
          ASSERT_TRUE(p.lanes != nullptr) << name_of(f) << " " << qisa_name(isa) << " M=" << M;
          auto w = random_weight(f, N, K, seed++);
          auto x = randn(size_t(M * K), seed++);
          auto bias = randn(size_t(N), seed++);
          const float* b = N % 2 ? bias.data() : nullptr;
          auto fast = run_qmatmul(f, isa, M, N, K, x, w, b);
          auto ref = run_reference_of(p, x, w, b);
          for (size_t i = 0; i < fast.size(); ++i)
            ASSERT_EQ(fast[i], ref[i]) << name_of(f) << " " << qisa_name(isa) << " M=" << M << " N=" << N
                                       << " K=" << K << " at " << i / N << "," << i % N;
        }
    }
  // bias + GELU, fused, against the reference's output with both applied after
  for (QIsa isa : simd_isas()) {
    const int64_t M = lane_min_rows(isa) + 5, N = 21, K = 4096;  // two sweeps
    const QFormat f = QFormat::int4_g128;
    const QMatmulPlan p = qmatmul_plan(f, M, N, K, isa);
    ASSERT_TRUE(p.lanes != nullptr);
    auto w = random_weight(f, N, K, seed++);
    auto x = randn(size_t(M * K), seed++);
    auto bias = randn(size_t(N), seed++);
    std::vector<float> y(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
    qmatmul(p, x.data(), w.data(), bias.data(), y.data(), nullptr, Activation::kGelu);
    auto ref = run_reference_of(p, x, w, bias.data());
    for (size_t i = 0; i < y.size(); ++i) {
      const double v = ref[i], gelu = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      ASSERT_NEAR(y[i], gelu, 1e-5 * std::fabs(gelu) + 1e-6) << qisa_name(isa) << " at " << i / N << "," << i % N;
    }
  }
  set_num_threads(1);
  // A row with NaN is NaN in every column; the rows beside it are not.
  const int64_t M = lane_min_rows(QIsa::kAvx2) + 9, N = 9, K = 256;  // the lanes on every ISA
  auto w = random_weight(QFormat::int4_g128, N, K, seed++);
  auto x = randn(size_t(M * K), seed++);
  x[size_t(3 * K + 40)] = std::numeric_limits<float>::quiet_NaN();
  for (QIsa isa : simd_isas()) {
    auto y = run_qmatmul(QFormat::int4_g128, isa, M, N, K, x, w, nullptr);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        EXPECT_EQ(std::isnan(y[size_t(m * N + n)]), m == 3) << qisa_name(isa) << " " << m << "," << n;
  }
}

// Weight memory: 64-byte aligned, 2 MiB-aligned from kLargePageBytes on (outside ASan
// builds), every byte writable up to the size asked for.
TEST(WeightMemory, AlignedAndWritable) {
  for (size_t bytes : {size_t(0), size_t(1), size_t(4095), kLargePageBytes - 1, kLargePageBytes,
                       kLargePageBytes * 3 + 4097}) {
    std::shared_ptr<void> m = alloc_weight_memory(bytes);
    ASSERT_NE(m.get(), nullptr);
    const uintptr_t p = reinterpret_cast<uintptr_t>(m.get());
    EXPECT_EQ(p % 64, 0u) << bytes;
#ifndef __SANITIZE_ADDRESS__
    if (bytes >= kLargePageBytes) EXPECT_EQ(p % kLargePageBytes, 0u) << bytes;
#endif
    std::memset(m.get(), 0x5A, bytes);
    if (bytes) EXPECT_EQ(static_cast<uint8_t*>(m.get())[bytes - 1], 0x5A);
  }
}

TEST(QuantKernels, NonFiniteActivationsGiveNaN) {
  const int64_t K = 256, N = 9;  // the 4-bit formats' one-row kernels take 8 weight rows at a time
  for (QFormat f : {QFormat::q8_0, QFormat::q4_0, QFormat::q4_1, QFormat::int4_g128, QFormat::q4_k, QFormat::q6_k,
                    QFormat::int8})
    for (QIsa isa : {QIsa::kScalar, QIsa::kAvx2, QIsa::kAvxVnni, QIsa::kAvx512}) {
      if (!qisa_supported(isa)) continue;
      auto w = random_weight(f, N, K, 7);
      auto x = randn(size_t(2 * K), 8);
      x[5] = std::numeric_limits<float>::infinity();
      x[K + 200] = std::numeric_limits<float>::quiet_NaN();
      auto y = run_qmatmul(f, isa, 2, N, K, x, w, nullptr);
      for (float v : y) EXPECT_TRUE(std::isnan(v)) << name_of(f) << " " << qisa_name(isa);
      for (int64_t m = 0; m < 2; ++m) {  // one row of x
        auto ym = run_qmatmul(f, isa, 1, N, K, std::vector<float>(x.begin() + m * K, x.begin() + (m + 1) * K), w, nullptr);
        for (float v : ym) EXPECT_TRUE(std::isnan(v)) << name_of(f) << " " << qisa_name(isa) << " row " << m;
      }
    }
}

// The same through the packed int8 GEMM (9 rows, dynamic activations: the per-block
// tiles and their zero share in float): a row holding inf or NaN is NaN throughout, the
// other rows finite.
TEST(QuantKernels, NonFiniteActivationsGiveNaNInTheInt8Gemm) {
  const int64_t M = 9, N = 40, K = 100;
  for (QIsa isa : simd_isas()) {
    auto w = random_weight(QFormat::int8, N, K, 9);
    auto x = randn(size_t(M * K), 10);
    x[size_t(2 * K + 5)] = std::numeric_limits<float>::infinity();
    x[size_t(7 * K + 99)] = std::numeric_limits<float>::quiet_NaN();
    const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
    std::vector<float> y(size_t(M * N));
    qmatmul(qmatmul_plan(QFormat::int8, M, N, K, isa), x.data(), w.data(), nullptr, y.data(), &packed);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        EXPECT_EQ(std::isnan(y[size_t(m * N + n)]), m == 2 || m == 7) << qisa_name(isa) << " row " << m;
  }
}

TEST(QuantKernels, ZeroRowsAndEmptyK) {
  std::vector<uint8_t> w(8, 0);
  float one = 1.0f;
  std::memcpy(w.data(), &one, 4);
  std::memcpy(w.data() + 4, &one, 4);
  const float bias[2] = {1.5f, -2.0f};
  std::vector<float> x(3), y(6, 7.0f);  // K = 0: y is the bias
  qmatmul(qmatmul_plan(QFormat::int8, 3, 2, 0), x.data(), w.data(), bias, y.data());
  for (int m = 0; m < 3; ++m) {
    EXPECT_EQ(y[size_t(2 * m)], 1.5f);
    EXPECT_EQ(y[size_t(2 * m + 1)], -2.0f);
  }
  qmatmul(qmatmul_plan(QFormat::q8_0, 0, 5, 64), nullptr, nullptr, nullptr, nullptr);  // nothing to do
  EXPECT_THROW(qmatmul_plan(QFormat::q4_k, 1, 1, 640), Error);
}

TEST(QuantKernels, EmbeddingRowsAndOutOfRangeIds) {
  set_num_threads(2);
  for (QFormat f : all_formats()) {
    const int64_t V = 9, K = qformat_info(f).block_elems ? 2 * std::max<int64_t>(qformat_info(f).block_elems, 32) : 40;
    const int64_t rb = qformat_row_bytes(f, K);
    auto w = random_weight(f, V, K, 11);
    auto table = dequant(f, w, V, K);
    const std::vector<int64_t> ids = {3, 0, 8, 3, 5};
    std::vector<float> out(ids.size() * size_t(K));
    qembedding(f, w.data(), V, rb, ids.data(), DType::i64, int64_t(ids.size()), out.data());
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(out[i * size_t(K) + size_t(k)], table[size_t(ids[i] * K + k)]) << name_of(f);
    const std::vector<int32_t> ids32 = {8, 1};
    qembedding(f, w.data(), V, rb, ids32.data(), DType::i32, 2, out.data());
    EXPECT_EQ(out[0], table[size_t(8 * K)]);
    for (int64_t bad : {int64_t(9), int64_t(-1), int64_t(1) << 40}) {
      const std::vector<int64_t> b = {1, bad};
      try {
        qembedding(f, w.data(), V, rb, b.data(), DType::i64, 2, out.data());
        ADD_FAILURE() << "id " << bad << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
      }
    }
  }
  set_num_threads(1);
}

// ---- The ops in the IR ----
TEST(QuantOps, TextFormRoundTripsWithTheFormatByName) {
  const std::string text = R"(graph(%x: f32[s0, 512], %w: u8[6, 288], %b: f32[6], %t: u8[10, 420], %ids: i64[s0]) {
  %y: f32[s0, 6] = qmatmul(%x, %w, %b) {format=q4_k}
  %e: f32[s0, 512] = qembedding(%t, %ids) {format=q6_k}
  return (%y, %e)
})";
  Graph g = parse_graph(text);
  verify(g);
  std::string printed = print_graph(g);
  EXPECT_NE(printed.find("{format=q4_k}"), std::string::npos) << printed;
  EXPECT_NE(printed.find("{format=q6_k}"), std::string::npos) << printed;
  EXPECT_EQ(print_graph(parse_graph(printed)), printed);
}

namespace {
// Parses `head` (a graph's signature), the node `body` and `tail`: inference must refuse
// it, naming `why`.
void expect_graph_rejected(const std::string& head, const std::string& body, const std::string& tail,
                           const std::string& why) {
  try {
    parse_graph(head + " {\n  " + body + "\n  " + tail + "\n}");
    ADD_FAILURE() << body << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << body << ": " << e.what();
  }
}
}  // namespace

TEST(QuantOps, InferenceRejectsBadWeightsAndShapes) {
  auto expect_rejected = [](const std::string& body, const std::string& why) {
    expect_graph_rejected("graph(%x: f32[2, 64], %w: u8[4, 68], %w2: u8[4, 34], %w3: u8[4, 67], %wf: f32[4, 68], "
                          "%b: f32[4], %b5: f32[5], %h: f16[2, 64], %i: i64[3], %f: f32[3])",
                          body, "return (%r)", why);
  };
  // row bytes not a whole number of blocks; K differs from x's; bias shape; dtypes
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %w3) {format=q8_0}", "not a whole number of q8_0 blocks");
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %w2) {format=q8_0}", "the q8_0 weight 32");
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %w, %b5) {format=q8_0}", "bias");
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %wf) {format=q8_0}", "must be u8");
  expect_rejected("%r: f32[2, 4] = qmatmul(%h, %w) {format=q8_0}", "x must be f32");
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %w)", "missing attribute 'format'");
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %w) {format=q3_k}", "");
  // one activation scale per row: int8 weights, and not with a static scale
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %w) {format=q8_0, row_scale=[1]}", "row_scale");
  expect_rejected("%r: f32[2, 4] = qmatmul(%x, %w) {format=int8, x_scale=f[0.5], row_scale=[1]}", "no x_scale");
  expect_rejected("%r: f32[3, 64] = qembedding(%w, %f) {format=q8_0}", "ids must be i64 or i32");
  expect_rejected("%r: f32[3, 64] = qembedding(%w3, %i) {format=q8_0}", "not a whole number");
  // u8 is storage: arithmetic refuses it
  expect_rejected("%r: u8[4, 68] = add(%w, %w)", "u8 is quantized weight storage");
  // a well-formed one is accepted, with int8's whole-row blocks
  Graph g = parse_graph(R"(graph(%x: f32[2, 64], %w: u8[4, 68], %b: f32[4]) {
  %y: f32[2, 4] = qmatmul(%x, %w, %b) {format=int8}
  %z: f32[2, 4] = qmatmul(%x, %w) {format=q8_0}
  %v: f32[2, 4] = qmatmul(%x, %w) {format=int8, row_scale=[1]}
  return (%y, %z, %v)
})");
  verify(g);
}

// The runtime runs both ops (the prepared qmatmul plan, batch dims flattened into rows)
// and moves u8 values like any other (a reshape aliases, a cast converts).
// The int8 GEMM (a weight packed by qmatmul_pack_int8 for each ISA this CPU has: AVX2,
// AVX-VNNI, AVX-512 VNNI) against the scalar reference: rows 1..13 (every tile height,
// remainders), columns around the 8-column groups and 32-column blocks, K with tails of
// 32 (and K < 4), with and without bias, one and two threads. The integer sums are the
// reference's (on the plan's activation codes: 7-bit on AVX2 from 8 rows); only the
// float sums' order differs.
TEST(QuantKernels, Int8GemmMatchesScalarReference) {
  unsigned seed = 100;
  for (QIsa isa : simd_isas())
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t K : {1, 3, 31, 32, 33, 100, 256})
      for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 10, 11, 13})  // tiles of 1, 2, 3 and 4 rows (narrow from 8 rows: 4, then 2, 3, 1)
        for (int64_t N : {1, 12, 17, 29, 32, 33, 70}) {  // the narrow tiles' second 8 columns cut short too
          auto w = random_weight(QFormat::int8, N, K, seed++);
          auto x = randn(size_t(M * K), seed++);
          auto bias = randn(size_t(N), seed++);
          const float* b = (M + N) % 2 ? bias.data() : nullptr;
          const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
          ASSERT_EQ(packed.source_bytes(), size_t(N * K));
          std::vector<float> fast(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
          const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa);
          EXPECT_EQ(plan.act_max, isa == QIsa::kAvx2 && M >= kQ8GemmRows ? 63 : 127);
          qmatmul(plan, x.data(), w.data(), b, fast.data(), &packed);
          auto ref = run_reference_of(plan, x, w, b);
          auto wd = dequant(QFormat::int8, w, N, K);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              const double bound = abs_dot(wd, x, K, n, m);
              const size_t i = size_t(m * N + n);
              ASSERT_NEAR(fast[i], ref[i], 1e-5 * bound + 1e-6) << qisa_name(isa) << " M=" << M << " N=" << N
                                                                << " K=" << K << " at " << m << "," << n;
            }
        }
  }
  set_num_threads(1);
}

// int8 weight rows [N, 4 + K] on the scale 1, at the extreme codes: row n is all 127,
// -128, -1 or 0 (n % 4), and from row 4 on one code (at n % K) is `mark`, so a mix-up of
// columns shows. The int8 GEMM tiles' worst cases.
std::vector<uint8_t> extreme_unit_rows(int64_t N, int64_t K, uint8_t mark) {
  const uint8_t fills[] = {0x7F, 0x80, 0xFF, 0x00};
  const int64_t rb = 4 + K;
  std::vector<uint8_t> w(size_t(N * rb));
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* row = w.data() + n * rb;
    std::memset(row + 4, fills[n % 4], size_t(K));
    if (n >= 4) row[4 + n % K] = mark;
    const float one = 1.0f;
    std::memcpy(row, &one, 4);
  }
  return w;
}

// The exact integer dot product of int8 weight row n (rows [N, 4 + K]) and row m of x
// [*, K], whose values are integers: what the int8 GEMM gives on the scale 1.
int64_t unit_dot(const std::vector<uint8_t>& w, const std::vector<float>& x, int64_t K, int64_t n, int64_t m) {
  int64_t exact = 0;
  for (int64_t k = 0; k < K; ++k) exact += int64_t(int8_t(w[size_t(n * (4 + K) + 4 + k)])) * int64_t(x[size_t(m * K + k)]);
  return exact;
}

// w's int8 codes clamped to +-63 (extreme_unit_rows' 127 and -128 become 63 and -63): 7-bit weights.
std::vector<uint8_t> seven_bit(std::vector<uint8_t> w, int64_t N, int64_t K) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      uint8_t& c = w[size_t(n * (4 + K) + 4 + k)];
      c = uint8_t(int8_t(std::max(-63, std::min(63, int(int8_t(c))))));
    }
  return w;
}

// AVX2's w7 narrow tiles (a weight of 7-bit codes, PackedOperand::q8_max <= 63), per 32
// values (weight-only int8's rows) and per 64 (int8-dynamic's: the tiles of pairs), at
// random scales against the scalar reference: 4-row tiles and tails of 1, 2 and 3 rows
// (M 8..13), column tails, lone last blocks, one and two threads.
TEST(QuantKernels, Int8GemmSevenBitWeightsMatchScalarReference) {
  if (!qisa_supported(QIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  unsigned seed = 900;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (bool row_scale : {false, true})
      for (int64_t K : {33, 96, 100, 256})
        for (int64_t M : {8, 9, 10, 11, 13})
          for (int64_t N : {17, 40}) {
            const auto w = seven_bit(random_weight(QFormat::int8, N, K, seed++), N, K);
            const auto x = randn(size_t(M * K), seed++);
            const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, QIsa::kAvx2);
            ASSERT_LE(int(packed.q8_max), 63);
            const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvx2, 0.0f, false, row_scale);
            ASSERT_EQ(plan.act_max, 63);
            ASSERT_EQ(plan.act_group, row_scale ? 2 : 1);
            std::vector<float> fast(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
            qmatmul(plan, x.data(), w.data(), nullptr, fast.data(), &packed);
            const auto ref = run_reference_of(plan, x, w, nullptr);
            const auto wd = dequant(QFormat::int8, w, N, K);
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                const double bound = abs_dot(wd, x, K, n, m);
                const size_t i = size_t(m * N + n);
                ASSERT_NEAR(fast[i], ref[i], 1e-5 * bound + 1e-6)
                    << "row_scale " << row_scale << " threads " << threads << " M=" << M << " N=" << N << " K=" << K
                    << " at " << m << "," << n;
              }
          }
  }
  set_num_threads(1);
}

// The narrow int8 GEMM tiles (unsigned weight codes times the activation codes) at their
// worst case: weight codes 127, -128, -1, 0 (255, 0, 127, 128 unsigned) against
// activation codes +-top in every sign pattern. AVX2 (one maddubs, 7-bit codes): top 63,
// where 2 x 255 x 63 = 32130 must not saturate; AVX-VNNI (vpdpbusd, 8-bit codes): top 127.
// And 7-bit weights, codes 63, -63, -1, 0: AVX2's w7 tiles read them as c + 64 (127, 1,
// 63, 64) and add two quads' pairs in int16, 2 x (2 x 127 x 63) = 32004 at worst.
// x is +-top itself, so every code is +-top on the scale 1 and the sums are exact: each
// output equals the integer dot product.
TEST(QuantKernels, Int8GemmNarrowTilesDoNotSaturate) {
  for (QIsa isa : {QIsa::kAvx2, QIsa::kAvxVnni})
  for (int64_t K : {32, 256, 100})
  for (bool w7 : {false, true}) {
    if (!qisa_supported(isa)) continue;
    const float top = isa == QIsa::kAvx2 ? 63.0f : 127.0f;
    const int64_t N = 40, M = 11;  // tiles of 4 rows, then 3
    const std::vector<uint8_t> w = w7 ? seven_bit(extreme_unit_rows(N, K, 0x3F), N, K) : extreme_unit_rows(N, K, 0x7F);
    std::vector<float> x(size_t(M * K));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const bool pos[] = {true, false, k % 2 == 0, (k / 2) % 2 == 0, k % 32 < 16, (k / 4) % 2 == 0,
                            (k / 8) % 2 == 0, k % 3 == 0, true, false, k % 5 < 2};
        x[size_t(m * K + k)] = pos[m] ? top : -top;
      }
    const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
    ASSERT_EQ(int(packed.q8_max), w7 ? 63 : 128);
    if (isa == QIsa::kAvx2 && !w7) {  // the w7 tiles are what runs on q8_max <= 63: told so, 8-bit codes wrap
      PackedOperand lie = packed;
      lie.q8_max = 63;
      std::vector<float> y(size_t(M * N));
      qmatmul(qmatmul_plan(QFormat::int8, M, N, K, isa), x.data(), w.data(), nullptr, y.data(), &lie);
      int64_t wrong = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const int64_t exact = unit_dot(w, x, K, n, m);
          wrong += y[size_t(m * N + n)] != float(exact);
        }
      EXPECT_GT(wrong, 0) << "K=" << K << ": 8-bit codes told 7-bit did not wrap: no w7 tile ran";
    }
    for (bool row_scale : {false, true}) {  // int8-dynamic's plan: AVX2's tiles of pairs
      const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa, 0.0f, false, row_scale);
      ASSERT_EQ(plan.act_max, int(top));
      ASSERT_EQ(plan.act_group, isa == QIsa::kAvx2 && row_scale ? 2 : 1);
      std::vector<float> y(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
      qmatmul(plan, x.data(), w.data(), nullptr, y.data(), &packed);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const int64_t exact = unit_dot(w, x, K, n, m);
          ASSERT_EQ(y[size_t(m * N + n)], float(exact)) << qisa_name(isa) << (w7 ? " 7-bit weights" : "")
                                                         << (row_scale ? " row_scale" : "") << " K=" << K << " row "
                                                         << m << " column " << n;
        }
    }
  }
}

// AVX2's int8 plans of 8+ rows on dynamic activations quantize each 64 values of x on one
// scale (act_group 2), and the narrow tiles sum each pair of blocks before scaling it:
// qmatmul (packed GEMM, and the dot kernels without a packed weight) equals x quantized
// per 64 values by the reference quantizer times the de-quantized weight, and differs
// from x quantized per 32 (the blocks of each pair get magnitudes 80x apart, so per 32
// and per 64 give different codes). K: one pair, a pair and a lone block, tails.
TEST(QuantKernels, Avx2DynamicRowsShareAScalePer64Values) {
  if (!qisa_supported(QIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  unsigned seed = 700;
  for (bool w7 : {false, true})  // 7-bit weight codes: the w7 tiles of pairs
  for (int64_t K : {64, 96, 100, 256, 33})
    for (int64_t M : {8, 9, 10}) {
      const int64_t N = 20;
      const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvx2, 0.0f, false, true);
      ASSERT_EQ(plan.act_group, 2);
      ASSERT_EQ(plan.act_max, 63);
      ASSERT_EQ(plan.row_scale, nullptr);
      ASSERT_EQ(qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvx2).act_group, 1);  // weight-only int8: per 32
      auto w = random_weight(QFormat::int8, N, K, seed++);
      if (w7) w = seven_bit(w, N, K);
      auto x = randn(size_t(M * K), seed++);
      for (int64_t i = 0; i < M * K; ++i) x[size_t(i)] *= (i % K) / 32 % 2 ? 8.0f : 0.1f;
      const auto wd = dequant(QFormat::int8, w, N, K);
      // x as codes times scales, per `block` values (the reference quantizer)
      auto dequantized_x = [&](int64_t block) {
        std::vector<float> xh(size_t(M * K));
        const int64_t kpad = (K + 31) / 32 * 32;
        std::vector<int8_t> q(static_cast<size_t>(kpad));
        std::vector<float> d(static_cast<size_t>(kpad / 32));
        std::vector<int16_t> s16(static_cast<size_t>(kpad / 16));
        for (int64_t m = 0; m < M; ++m) {
          quant::quantize_act_row(x.data() + m * K, K, block, q.data(), d.data(), s16.data(), 0.0f, 63);
          for (int64_t k = 0; k < K; ++k) xh[size_t(m * K + k)] = float(q[size_t(k)]) * d[size_t(k / block)];
        }
        return xh;
      };
      const auto x64 = dequantized_x(64), x32 = dequantized_x(32);
      const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, QIsa::kAvx2);
      ASSERT_EQ(packed.q8_max <= 63, w7);
      std::vector<float> gemm(size_t(M * N)), dots(size_t(M * N));
      qmatmul(plan, x.data(), w.data(), nullptr, gemm.data(), &packed);
      qmatmul(plan, x.data(), w.data(), nullptr, dots.data(), nullptr);
      int64_t apart_from_32 = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0, want32 = 0, bound = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double wk = wd[size_t(n * K + k)];
            want += wk * x64[size_t(m * K + k)];
            want32 += wk * x32[size_t(m * K + k)];
            bound += std::fabs(wk) * std::fabs(x[size_t(m * K + k)]);
          }
          const size_t i = size_t(m * N + n);
          ASSERT_NEAR(gemm[i], want, 1e-5 * bound + 1e-6) << "w7 " << w7 << " K=" << K << " M=" << M << " at " << m << "," << n;
          ASSERT_NEAR(dots[i], want, 1e-5 * bound + 1e-6) << "w7 " << w7 << " K=" << K << " M=" << M << " at " << m << "," << n;
          apart_from_32 += std::fabs(want32 - want) > 1e-4 * bound + 1e-6;
        }
      if (K > 32) EXPECT_GT(apart_from_32, M * N / 2) << "K=" << K << ": per 32 and per 64 agree; the test proves nothing";
    }
}

// q8_gemm_packed runs AVX2's tiles of pairs on rows of group 2 (and only there). With
// scales that differ inside a pair (which no quantizer writes) the pair tiles scale both
// blocks' sums by the pair's last scale: the result is that formula, not the per-block
// tiles' (group 1 on the same rows), so a plan or selection that never ran the pair
// tiles, or one that scaled by the pair's first scale, fails.
TEST(QuantKernels, Avx2PairTilesRunOnRowsOfGroupTwo) {
  if (!qisa_supported(QIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  const int64_t M = 9, N = 20, K = 160;  // 5 blocks: two pairs and a lone last block
  const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvx2, 0.0f, false, true);
  ASSERT_EQ(plan.act_group, 2);
  const auto w = random_weight(QFormat::int8, N, K, 31);
  const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, QIsa::kAvx2);
  const int64_t kpad = plan.kpad, nb = kpad / 32;
  std::vector<int8_t> q(size_t(M * kpad));
  std::vector<float> d(size_t(M * nb));
  std::vector<int16_t> s16(size_t(M * kpad / 16));
  unsigned state = 5;
  for (auto& c : q) c = int8_t(int((state = state * 1103515245u + 12345u) >> 16) % 127 - 63);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < nb; ++b) d[size_t(m * nb + b)] = 0.01f * float(1 + (b + m) % 3);
  for (int64_t g = 0; g < M * kpad / 16; ++g) {
    int t = 0;
    for (int i = 0; i < 16; ++i) t += q[size_t(16 * g + i)];
    s16[size_t(g)] = int16_t(t);
  }
  auto gemm = [&](int32_t group) {
    QActRows rows{q.data(), d.data(), s16.data(), nullptr, nullptr, kpad, nb, kpad / 16, K};
    rows.group = group;
    std::vector<float> y(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
    q8_gemm_packed(plan, rows, packed, y.data(), {});
    return y;
  };
  const auto pairs = gemm(2), blocks = gemm(1);
  int64_t apart = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float wscale;
      std::memcpy(&wscale, w.data() + n * (4 + K), 4);
      double sum = 0, share = 0, own = 0, bound = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const double dend = d[size_t(m * nb + std::min(nb - 1, b | 1))], db = d[size_t(m * nb + b)];
        for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
          const int code = k < K ? int(int8_t(w[size_t(n * (4 + K) + 4 + k)])) : 0, a = q[size_t(m * kpad + k)];
          sum += dend * (code + 128) * a;  // the tile: unsigned codes, the pair's last scale
          share += db * 128 * a;           // the zero point's share, per block (QActRow::zshare)
          own += db * code * a;
          bound += db * (std::abs(code) + 128) * std::abs(a);
        }
      }
      const size_t i = size_t(m * N + n);
      ASSERT_NEAR(pairs[i], wscale * (sum - share), 1e-5 * wscale * bound) << m << "," << n;
      ASSERT_NEAR(blocks[i], wscale * own, 1e-5 * wscale * bound) << m << "," << n;
      apart += std::fabs(pairs[i] - blocks[i]) > 1e-3 * wscale * bound;
    }
  EXPECT_GT(apart, M * N / 2);
}

// The first plan.M rows of x [*, plan.K] quantized by hand on the scale 1, then the packed
// int8 GEMM over them as uniform rows, marked non-negative or not (which tiles run).
std::vector<float> gemm_unit_rows(const QMatmulPlan& plan, const std::vector<float>& x, const PackedOperand& packed,
                                  bool nonneg) {
  const int64_t M = plan.M, K = plan.K;
  std::vector<int8_t> q(size_t(M * plan.kpad));
  std::vector<float> d(size_t(M * plan.nscales));
  std::vector<int16_t> s16(size_t(M * plan.nsums));
  for (int64_t m = 0; m < M; ++m)
    quant::quantize_act_row(x.data() + m * K, K, 32, q.data() + m * plan.kpad, d.data() + m * plan.nscales,
                            s16.data() + m * plan.nsums, 1.0f);
  QActRows rows{q.data(), d.data(), s16.data(), nullptr, nullptr, plan.kpad, plan.nscales, plan.nsums, K, true};
  rows.nonneg = nonneg;
  std::vector<float> y(size_t(M * plan.N), std::numeric_limits<float>::quiet_NaN());
  q8_gemm_packed(plan, rows, packed, y.data(), {});
  return y;
}

// Static rows with no negative code (an input after ReLU): AVX2's uniform tiles take the
// codes as maddubs' unsigned operand, weight codes 127 / -128 against runs of activation
// codes 127 making pairs of +-32512 at most. On the scale 1 the sums are exact: each
// output equals the integer dot product, through qmatmul (a row with one code of -1 goes
// back to the sign trick) and through q8_gemm_packed with the rows marked non-negative
// and not (so the non-negative tiles are run for certain).
TEST(QuantKernels, Int8GemmNonNegativeStaticRowsAreExact) {
  for (QIsa isa : simd_isas()) {
    for (int64_t K : {32, 100, 1000})
      for (bool one_negative : {false, true}) {
        const int64_t N = 40, M = 13;  // tiles of 8 and 5 rows
        const std::vector<uint8_t> w = extreme_unit_rows(N, K, 0x01);
        std::vector<float> x(size_t(M * K));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < K; ++k) x[size_t(m * K + k)] = float((m + k) % 5 == 0 ? 0 : 127 - (m % 2) * (k % 3));
        if (one_negative) x[size_t(5 * K + K / 2)] = -1.0f;
        const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
        const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa, 1.0f);
        auto check = [&](const std::vector<float>& y, const char* how) {
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              const int64_t exact = unit_dot(w, x, K, n, m);
              ASSERT_EQ(y[size_t(m * N + n)], float(exact)) << qisa_name(isa) << " " << how << " K=" << K
                                                            << (one_negative ? " one negative" : "") << " row " << m
                                                            << " column " << n;
            }
        };
        std::vector<float> y(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
        qmatmul(plan, x.data(), w.data(), nullptr, y.data(), &packed);
        check(y, "qmatmul");
        if (one_negative) continue;
        // The rows quantized by hand, then the GEMM told they are (or are not) non-negative.
        for (bool nonneg : {true, false})
          check(gemm_unit_rows(plan, x, packed, nonneg), nonneg ? "rows marked non-negative" : "rows not marked");
      }
  }
}

// Weights of 7-bit codes (every |code| <= 63, PackedOperand::q8_max) against rows with no
// negative code: AVX2's w7 tiles add two quads' maddubs pairs in int16, at worst
// 2 x (2 x 127 x 63) = 32004 with codes 63 / -63 against runs of 127. On the scale 1 each
// output equals the integer dot product, through qmatmul and through q8_gemm_packed with
// the rows marked non-negative (the w7 tiles, every row count 1..8) and not. And the w7
// tiles are what ran: 8-bit codes (127, -128) packed with q8_max forced to 63 wrap.
TEST(QuantKernels, Int8GemmSevenBitWeightsDoNotSaturate) {
  for (QIsa isa : simd_isas()) {
    const QMatmulPlan any = qmatmul_plan(QFormat::int8, 8, 32, 64, isa, 1.0f);
    EXPECT_EQ(any.uniform_w7_tiles != nullptr, isa == QIsa::kAvx2) << qisa_name(isa);  // AVX2's alone
    EXPECT_EQ(any.narrow_w7_tiles != nullptr, isa == QIsa::kAvx2) << qisa_name(isa);
    for (int64_t K : {32, 100, 1000})
      for (bool lie : {false, true}) {
        const int64_t N = 40, MM = 13;
        const std::vector<uint8_t> w =
            lie ? extreme_unit_rows(N, K, 0x01) : seven_bit(extreme_unit_rows(N, K, 0x01), N, K);
        std::vector<float> x(size_t(MM * K));
        for (int64_t m = 0; m < MM; ++m)
          for (int64_t k = 0; k < K; ++k) x[size_t(m * K + k)] = float((m + k) % 7 == 0 ? 0 : 127 - (m % 2) * (k % 3));
        PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
        ASSERT_EQ(int(packed.q8_max), lie ? 128 : 63);
        if (lie) {
          if (isa != QIsa::kAvx2) continue;  // (only AVX2 has w7 tiles)
          packed.q8_max = 63;
        }
        for (int64_t M : {MM, int64_t(1), int64_t(2), int64_t(3), int64_t(4), int64_t(6), int64_t(7)}) {
          const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa, 1.0f);
          int64_t wrong = 0;
          auto check = [&](const std::vector<float>& y, const char* how) {
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                const int64_t exact = unit_dot(w, x, K, n, m);
                if (lie) {
                  wrong += y[size_t(m * N + n)] != float(exact);
                  continue;
                }
                ASSERT_EQ(y[size_t(m * N + n)], float(exact))
                    << qisa_name(isa) << " " << how << " K=" << K << " M=" << M << " row " << m << " column " << n;
              }
          };
          std::vector<float> y(size_t(M * N), std::numeric_limits<float>::quiet_NaN());
          if (M == MM && !lie) {
            qmatmul(plan, x.data(), w.data(), nullptr, y.data(), &packed);
            check(y, "qmatmul");
          }
          for (bool nonneg : {true, false})
            if (nonneg || !lie)
              check(gemm_unit_rows(plan, x, packed, nonneg), nonneg ? "rows marked non-negative" : "rows not marked");
          if (lie) EXPECT_GT(wrong, 0) << "K=" << K << " M=" << M << ": 8-bit codes told 7-bit did not wrap: no w7 tile ran";
        }
      }
  }
}

// A static activation scale: the packed int8 GEMM sums each row over all of K (the
// uniform tiles) and equals the scalar reference; a row holding a NaN is NaN throughout.
TEST(QuantKernels, Int8GemmStaticScaleMatchesScalarReference) {
  unsigned seed = 300;
  for (QIsa isa : simd_isas()) {
    for (int64_t K : {1, 33, 100, 256, 1000, 65568})  // past 65536: the per-block tiles take them
      for (int64_t M : {8, 13, 21, 23, 30}) {  // AVX-512's 12-row tiles and remainders of 1, 9, 11, 6
        if (K > 65536 && M > 8) continue;
        const int64_t N = K > 65536 ? 33 : 70;
        auto w = random_weight(QFormat::int8, N, K, seed++);
        auto x = randn(size_t(M * K), seed++);
        x[size_t(3 * K + K / 2)] = NAN;  // row 3
        const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
        const auto wd = dequant(QFormat::int8, w, N, K);
        std::vector<float> fast(size_t(M * N)), ref(size_t(M * N));
        qmatmul(qmatmul_plan(QFormat::int8, M, N, K, isa, 0.02f), x.data(), w.data(), nullptr, fast.data(), &packed);
        qmatmul(qmatmul_plan(QFormat::int8, M, N, K, QIsa::kScalar, 0.02f), x.data(), w.data(), nullptr, ref.data());
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const size_t i = size_t(m * N + n);
            if (m == 3) {
              ASSERT_TRUE(std::isnan(fast[i])) << qisa_name(isa) << " K=" << K << " n=" << n;
              continue;
            }
            // Float sums in another order (and past 65536 the per-block tiles' zero share,
            // 128 x the row's codes in float, off sums of unsigned codes): a bound from the
            // magnitudes summed.
            const double bound = abs_dot(wd, x, K, n, m);
            ASSERT_NEAR(fast[i], ref[i], 1e-5 * bound + 1e-6)
                << qisa_name(isa) << " K=" << K << " at " << m << "," << n;
          }
      }
  }
}

namespace {
// SmoothQuant's kind of x_mul: K positive values; and x [M, K] times it per channel, in float32.
std::vector<float> positive_mul(int64_t K, unsigned seed, float floor) {
  auto mul = randn(size_t(K), seed);
  for (float& v : mul) v = floor + std::fabs(v);
  return mul;
}
std::vector<float> times_per_channel(const std::vector<float>& x, const std::vector<float>& mul, int64_t M, int64_t K) {
  std::vector<float> xm(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) xm[size_t(m * K + k)] = x[size_t(m * K + k)] * mul[size_t(k)];
  return xm;
}
}  // namespace

// x_mul (static INT8's per-channel multiplier, SmoothQuant) gives what quantizing x * x_mul
// computed beforehand gives, bit for bit: on every ISA, on the dot kernels (few rows, no
// packed weight), the int8 GEMM (packed) and the GEMM over parts, with a NaN row, on 1
// and 2 threads.
TEST(QuantKernels, StaticXMulEqualsMultiplyingFirst) {
  unsigned seed = 1500;
  std::vector<QIsa> isas = simd_isas();
  isas.push_back(QIsa::kScalar);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (QIsa isa : isas)
      for (int64_t K : {1, 33, 100, 384})
        for (int64_t M : {1, 3, 8, 21, 37}) {
          const int64_t N = 64;
          auto w = random_weight(QFormat::int8, N, K, seed++);
          auto x = randn(size_t(M * K), seed++);
          const auto mul = positive_mul(K, seed++, 0.25f);
          if (M > 2) x[size_t(2 * K + K / 2)] = NAN;  // row 2
          const auto xm = times_per_channel(x, mul, M, K);
          const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa, 0.03f);
          const bool gemm = isa != QIsa::kScalar;
          const PackedOperand packed = gemm ? qmatmul_pack_int8(w.data(), N, K, isa) : PackedOperand{};
          for (bool use_packed : {false, true}) {
            if (use_packed && !gemm) continue;
            const PackedOperand* pk = use_packed ? &packed : nullptr;
            std::vector<float> got(size_t(M * N)), want(size_t(M * N));
            qmatmul(plan, x.data(), w.data(), nullptr, got.data(), pk, Activation::kNone, mul.data());
            qmatmul(plan, xm.data(), w.data(), nullptr, want.data(), pk);
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
                  << qisa_name(isa) << " threads " << threads << " K " << K << " M " << M << " packed "
                  << use_packed << " at " << i << ": " << got[i] << " vs " << want[i];
          }
          if (!gemm) continue;
          std::vector<float> a(size_t(M * 32)), b(size_t(M * 32)), wa(size_t(M * 32)), wb(size_t(M * 32));
          qmatmul_parts(plan, x.data(), {{nullptr, a.data(), 32}, {nullptr, b.data(), 32}}, packed, Activation::kNone,
                        mul.data());
          qmatmul_parts(plan, xm.data(), {{nullptr, wa.data(), 32}, {nullptr, wb.data(), 32}}, packed);
          for (size_t i = 0; i < a.size(); ++i) {
            ASSERT_TRUE(a[i] == wa[i] || (std::isnan(a[i]) && std::isnan(wa[i]))) << qisa_name(isa) << " parts " << i;
            ASSERT_TRUE(b[i] == wb[i] || (std::isnan(b[i]) && std::isnan(wb[i]))) << qisa_name(isa) << " parts " << i;
          }
        }
  }
  set_num_threads(1);
  // only with static activations
  const auto w = random_weight(QFormat::int8, 32, 16, 1);
  std::vector<float> x(16), mul(16, 1.0f), y(32);
  EXPECT_THROW(qmatmul(qmatmul_plan(QFormat::int8, 1, 32, 16, QIsa::kScalar), x.data(), w.data(), nullptr, y.data(),
                       nullptr, Activation::kNone, mul.data()),
               Error);
}

// The one-pass quantizer of uniform rows (quantize_uniform_row_*) gives quantize_act_row's
// codes on the same scale, value for value, and their sum: with and without mul, ties
// (values at half a step), values past the clamp, qmax 127 and 63; a NaN or an infinity
// (in x, or made by mul) is reported, not quantized.
TEST(QuantKernels, UniformRowQuantizerMatchesBlockQuantizer) {
  std::vector<std::pair<QIsa, quant::QuantizeUniformFn>> fns;
  for (QIsa isa : simd_isas())
    fns.push_back({isa, isa == QIsa::kAvx512 ? quant::quantize_uniform_row_avx512 : quant::quantize_uniform_row_avx2});
  unsigned seed = 2600;
  for (auto [isa, fn] : fns)
    for (int64_t K : {32, 64, 384, 1536, 4096})
      for (int qmax : {127, 63})
        for (bool with_mul : {false, true}) {
          const float scale = 0.02f;
          auto x = randn(size_t(K), seed++);
          for (int64_t k = 0; k < K; k += 7) x[size_t(k)] = (float(k % 40) - 20.5f) * scale;  // ties
          x[0] = 1e6f;
          x[size_t(K - 1)] = -1e6f;  // clamped
          const auto mul = positive_mul(K, seed++, 0.25f);
          std::vector<float> xm(x);
          if (with_mul)
            for (int64_t k = 0; k < K; ++k) xm[size_t(k)] = x[size_t(k)] * mul[size_t(k)];
          std::vector<int8_t> want(static_cast<size_t>(K)), got(static_cast<size_t>(K));
          std::vector<float> d(size_t(K / 32));
          std::vector<int16_t> s16(size_t(K / 16));
          quant::quantize_act_row(xm.data(), K, 32, want.data(), d.data(), s16.data(), scale, qmax);
          int32_t total = 0;
          ASSERT_TRUE(fn(x.data(), with_mul ? mul.data() : nullptr, K, 1.0f / scale, qmax, got.data(), &total))
              << qisa_name(isa);
          int32_t sum = 0;
          for (int64_t k = 0; k < K; ++k) {
            ASSERT_EQ(int(got[size_t(k)]), int(want[size_t(k)]))
                << qisa_name(isa) << " K " << K << " qmax " << qmax << " mul " << with_mul << " at " << k;
            sum += want[size_t(k)];
          }
          EXPECT_EQ(total, sum) << qisa_name(isa) << " K " << K;
          for (float bad : {NAN, INFINITY, -INFINITY}) {
            std::vector<float> y(x);
            y[size_t(K / 2 + 3)] = bad;
            EXPECT_FALSE(fn(y.data(), with_mul ? mul.data() : nullptr, K, 1.0f / scale, qmax, got.data(), &total))
                << qisa_name(isa) << " K " << K << " " << bad;
          }
          if (with_mul) {  // finite x, an infinite product
            std::vector<float> y(x), big(mul);
            y[5] = 3e38f;
            big[5] = 4.0f;
            EXPECT_FALSE(fn(y.data(), big.data(), K, 1.0f / scale, qmax, got.data(), &total)) << qisa_name(isa);
          }
        }
}

// qmatmul over rows of one scale gives the same outputs, bit for bit, whether its rows
// are quantized in one pass (quantize_uniform) or block by block (the plan without it):
// static INT8 with and without x_mul, dynamic INT8 per row, inputs with no negative value
// (AVX2's tiles without the sign trick), a scale whose inverse overflows and K not a whole
// number of 32s (both left to the blocks), rows holding NaN or an infinity, a zero row,
// the GEMM over parts, 1 and 2 threads, AVX-512's 12-row tiles and remainders.
TEST(QuantKernels, Int8GemmOnePassRowsEqualBlockRows) {
  unsigned seed = 2700;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (QIsa isa : simd_isas())
      for (int64_t K : {32, 100, 384, 1536})
        for (int64_t M : {8, 13, 30})
          // static, static with x_mul, dynamic per row, static over x >= 0, a subnormal static scale
          for (int mode = 0; mode < 5; ++mode) {
            const int64_t N = 70;
            auto w = random_weight(QFormat::int8, N, K, seed++);
            auto x = randn(size_t(M * K), seed++);
            if (mode == 3)
              for (float& v : x) v = std::fabs(v);
            x[size_t(2 * K + K / 3)] = NAN;        // row 2
            x[size_t(5 * K + 1)] = -INFINITY;      // row 5
            std::fill_n(x.begin() + 6 * K, K, 0.0f);  // row 6
            const auto mul = positive_mul(K, seed++, 0.25f);
            const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
            const float x_scale = mode == 2 ? 0.0f : mode == 4 ? 1e-39f : 0.03f;
            const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa, x_scale, false, mode == 2);
            if (mode == 2 && !plan.row_scale) continue;  // (per-row scales where the ISA takes them)
            ASSERT_TRUE(plan.quantize_uniform) << qisa_name(isa);
            QMatmulPlan blocks = plan;
            blocks.quantize_uniform = nullptr;
            const float* xm = mode == 1 ? mul.data() : nullptr;
            std::vector<float> got(size_t(M * N)), want(size_t(M * N));
            qmatmul(plan, x.data(), w.data(), nullptr, got.data(), &packed, Activation::kNone, xm);
            qmatmul(blocks, x.data(), w.data(), nullptr, want.data(), &packed, Activation::kNone, xm);
            const std::string what = std::string(qisa_name(isa)) + " threads " + std::to_string(threads) + " K " +
                                     std::to_string(K) + " M " + std::to_string(M) + " mode " + std::to_string(mode);
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
                  << what << " at " << i << ": " << got[i] << " vs " << want[i];
            for (int64_t n = 0; n < N; ++n) {
              ASSERT_TRUE(std::isnan(got[size_t(2 * N + n)]) && std::isnan(got[size_t(5 * N + n)])) << what;
              ASSERT_EQ(got[size_t(6 * N + n)], 0.0f) << what;
            }
            if (mode != 1) continue;
            // the GEMM over parts (Q, K and V): 32 + 38 columns
            const auto w2 = random_weight(QFormat::int8, 64, K, seed++);
            const PackedOperand p2 = qmatmul_pack_int8(w2.data(), 64, K, isa);
            const QMatmulPlan pp = qmatmul_plan(QFormat::int8, M, 64, K, isa, x_scale);
            QMatmulPlan pb = pp;
            pb.quantize_uniform = nullptr;
            std::vector<float> a(size_t(M * 32)), b(size_t(M * 32)), wa(size_t(M * 32)), wb(size_t(M * 32));
            qmatmul_parts(pp, x.data(), {{nullptr, a.data(), 32}, {nullptr, b.data(), 32}}, p2, Activation::kNone, xm);
            qmatmul_parts(pb, x.data(), {{nullptr, wa.data(), 32}, {nullptr, wb.data(), 32}}, p2, Activation::kNone, xm);
            for (size_t i = 0; i < a.size(); ++i) {
              ASSERT_TRUE(a[i] == wa[i] || (std::isnan(a[i]) && std::isnan(wa[i]))) << what << " parts " << i;
              ASSERT_TRUE(b[i] == wb[i] || (std::isnan(b[i]) && std::isnan(wb[i]))) << what << " parts " << i;
            }
          }
  }
  set_num_threads(1);
}

// The runtime reads qmatmul's x_mul as its last input (after the bias), and refuses one
// without x_scale or of the wrong length when the graph is built.
TEST(QuantOps, RuntimeQmatmulTakesXMulLast) {
  set_num_threads(2);
  const int64_t M = 24, K = 100, N = 40;
  auto w = random_weight(QFormat::int8, N, K, 51);
  auto x = randn(size_t(M * K), 52);
  auto bias = randn(size_t(N), 53);
  auto mul = positive_mul(K, 54, 0.5f);
  auto xm = times_per_channel(x, mul, M, K);
  const std::string sig = "graph(%x: f32[24, 100], %w: u8[40, 104], %b: f32[40], %s: f32[100]) {\n";
  Executable with(parse_graph(sig + "  %y: f32[24, 40] = qmatmul(%x, %w, %b, %s) {format=int8, x_scale=f[0.04], "
                                    "x_mul=[1]}\n  return (%y)\n}"));
  Executable without(parse_graph(sig + "  %y: f32[24, 40] = qmatmul(%x, %w, %b) {format=int8, x_scale=f[0.04]}\n"
                                       "  return (%y)\n}"));
  with.set_constant_inputs({1, 3});
  without.set_constant_inputs({1});
  auto got = with.run({{x.data(), DType::f32, {M, K}}, {w.data(), DType::u8, {N, 4 + K}},
                       {bias.data(), DType::f32, {N}}, {mul.data(), DType::f32, {K}}}, {});
  auto want = without.run({{xm.data(), DType::f32, {M, K}}, {w.data(), DType::u8, {N, 4 + K}},
                           {bias.data(), DType::f32, {N}}, {mul.data(), DType::f32, {K}}}, {});
  const float* a = static_cast<const float*>(got[0].data);
  const float* b = static_cast<const float*>(want[0].data);
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(a[i], b[i]) << i;
  EXPECT_THROW(parse_graph(sig + "  %y: f32[24, 40] = qmatmul(%x, %w, %b, %s) {format=int8, x_mul=[1]}\n"
                                 "  return (%y)\n}"),
               Error);  // no x_scale
  EXPECT_THROW(parse_graph("graph(%x: f32[24, 100], %w: u8[40, 104], %s: f32[99]) {\n  %y: f32[24, 40] = "
                           "qmatmul(%x, %w, %s) {format=int8, x_scale=f[0.04], x_mul=[1]}\n  return (%y)\n}"),
               Error);  // wrong length
  set_num_threads(1);
}

// Siblings with x_mul (SmoothQuant's multiplier) share a GEMM when they read one and the
// same x_mul value (x's codes are then theirs alike), with or without biases, and give
// what the separate qmatmuls give, bit for bit (24 rows: the packed int8 GEMM; 2: the dot
// kernels, the parts one by one); with another multiplier they stay apart.
TEST(QuantOps, SiblingsShareAnXMulOrStayApart) {
  set_num_threads(2);
  const int64_t K = 100;
  for (int64_t M : {2, 24}) {
    const std::string m = std::to_string(M);
    const std::string text = "graph(%x: f32[" + m + ", 100], %w: u8[32, 104], %v: u8[64, 104], %u: u8[32, 104], "
        "%bw: f32[32], %bv: f32[64], %s: f32[100], %t: f32[100]) {\n"
        "  %a: f32[" + m + ", 32] = qmatmul(%x, %w, %bw, %s) {format=int8, x_scale=f[0.04], x_mul=[1]}\n"
        "  %b: f32[" + m + ", 64] = qmatmul(%x, %v, %bv, %s) {format=int8, x_scale=f[0.04], x_mul=[1]}\n"
        "  %c: f32[" + m + ", 32] = qmatmul(%x, %u, %bw, %t) {format=int8, x_scale=f[0.04], x_mul=[1]}\n"
        "  %d: f32[" + m + ", 32] = qmatmul(%x, %w, %s) {format=int8, x_scale=f[0.04], x_mul=[1]}\n"
        "  %e: f32[" + m + ", 32] = qmatmul(%x, %u, %s) {format=int8, x_scale=f[0.04], x_mul=[1]}\n"
        "  %f: f32[" + m + ", 32] = qmatmul(%x, %u, %bw) {format=int8, x_scale=f[0.04]}\n"
        "  return (%a, %b, %c, %d, %e, %f)\n}";
    const Graph plain = parse_graph(text);
    Graph g = plain;
    // %a with %b (biases), %d with %e (none); %c apart (another x_mul), and %f (a bias, no
    // x_mul: as many inputs as %d and %e)
    ASSERT_EQ(fuse_qmatmul_siblings(g), 2);
    verify(g);
    int two = 0;
    for (const Node& n : g.nodes)
      if (n.op == Op::qmatmul && n.i("parts", 1) == 2) {
        ++two;
        EXPECT_EQ(n.inputs.back(), 6) << print_graph(g);  // %s, the shared multiplier, last
      }
    EXPECT_EQ(two, 2);
    EXPECT_EQ(g.nodes.size(), 4u);
    std::vector<std::vector<uint8_t>> w;
    for (int64_t r : {32, 64, 32}) w.push_back(random_weight(QFormat::int8, r, K, unsigned(70 + r)));
    auto x = randn(size_t(M * K), 71), bw = randn(32, 72), bv = randn(64, 73);
    std::vector<float> sm(static_cast<size_t>(K)), tm(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) {
      sm[size_t(i)] = 0.5f + 0.01f * float(i);
      tm[size_t(i)] = 2.0f - 0.01f * float(i);
    }
    const std::vector<InTensor> in = {{x.data(), DType::f32, {M, K}},       {w[0].data(), DType::u8, {32, 104}},
                                      {w[1].data(), DType::u8, {64, 104}}, {w[2].data(), DType::u8, {32, 104}},
                                      {bw.data(), DType::f32, {32}},        {bv.data(), DType::f32, {64}},
                                      {sm.data(), DType::f32, {K}},         {tm.data(), DType::f32, {K}}};
    Executable fused(g), apart(plain);
    for (Executable* e : {&fused, &apart}) e->set_constant_inputs({1, 2, 3});
    auto yf = fused.run(in, {}), ya = apart.run(in, {});
    const int64_t cols[] = {32, 64, 32, 32, 32, 32};
    for (size_t o = 0; o < 6; ++o) {
      const float* f = static_cast<const float*>(yf[o].data);
      const float* a = static_cast<const float*>(ya[o].data);
      for (int64_t i = 0; i < M * cols[o]; ++i) ASSERT_EQ(f[i], a[i]) << "M=" << M << " output " << o << " at " << i;
    }
  }
  set_num_threads(1);
}

// The runtime offers a constant int8 weight packed to qmatmul when 8 or more rows read it
// (AVX2, AVX-VNNI, AVX-512 VNNI), and the packed run equals the unpacked kernels' within float order.
TEST(QuantOps, RuntimePacksConstantInt8WeightsForManyRows) {
  set_num_threads(2);
  const int64_t M = 24, K = 100, N = 40;
  auto w = random_weight(QFormat::int8, N, K, 31);
  auto x = randn(size_t(M * K), 32);
  auto bias = randn(size_t(N), 33);
  Executable exe(parse_graph(R"(graph(%x: f32[24, 100], %w: u8[40, 104], %b: f32[40]) {
  %y: f32[24, 40] = qmatmul(%x, %w, %b) {format=int8}
  return (%y)
})"));
  exe.set_constant_inputs({1});
  auto out = exe.run({{x.data(), DType::f32, {M, K}}, {w.data(), DType::u8, {N, 4 + K}}, {bias.data(), DType::f32, {N}}},
                     {});
  const bool gemm = qisa_default() != QIsa::kScalar;
  EXPECT_EQ(exe.packed_bytes(), gemm ? size_t(N * K) : 0u);
  auto ref = run_reference_of(qmatmul_plan(QFormat::int8, M, N, K), x, w, bias.data());
  const float* y = static_cast<const float*>(out[0].data);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-3 * (1 + std::fabs(ref[i]))) << i;
  set_num_threads(1);
}

// A GELU after qmatmul joins it (fuse_epilogue), and the fused op equals GELU of the
// unfused one on both paths: the dot kernels (2 rows) and the int8 GEMM (24 rows, the
// weight constant).
TEST(QuantOps, FusedActivationEqualsTheSeparateOp) {
  set_num_threads(2);
  const int64_t K = 100, N = 40;
  for (int64_t M : {2, 24}) {
    auto w = random_weight(QFormat::int8, N, K, 41);
    auto x = randn(size_t(M * K), 42);
    auto bias = randn(size_t(N), 43);
    const std::string sig = "graph(%x: f32[" + std::to_string(M) + ", 100], %w: u8[40, 104], %b: f32[40]) {\n";
    const std::string mm = "  %y: f32[" + std::to_string(M) + ", 40] = qmatmul(%x, %w, %b) {format=int8}\n";
    Graph g = parse_graph(sig + mm + "  %g: f32[" + std::to_string(M) + ", 40] = gelu(%y)\n  return (%g)\n}");
    Graph sep = g;
    ASSERT_EQ(fuse_epilogue(g), 1);
    dead_code_elimination(g);
    ASSERT_EQ(g.nodes.size(), 1u);
    ASSERT_EQ(g.nodes[0].i("activation", 0), int64_t(Activation::kGelu));
    Executable fused(g), separate(sep);
    fused.set_constant_inputs({1});
    separate.set_constant_inputs({1});
    const std::vector<InTensor> in = {
        {x.data(), DType::f32, {M, K}}, {w.data(), DType::u8, {N, 4 + K}}, {bias.data(), DType::f32, {N}}};
    auto a = fused.run(in, {});
    auto b = separate.run(in, {});
    const float* ya = static_cast<const float*>(a[0].data);
    const float* yb = static_cast<const float*>(b[0].data);
    // both apply gelu_exact_n to the same biased sums: equal bit for bit
    for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(ya[i], yb[i]) << "M=" << M << " at " << i;
  }
  set_num_threads(1);
}

TEST(QuantOps, RuntimeRunsQmatmulAndQembedding) {
  set_num_threads(2);
  const int64_t K = 256, N = 6, V = 10;
  auto w = random_weight(QFormat::q4_k, N, K, 21);
  auto t = random_weight(QFormat::q8_0, V, K, 22);
  auto bias = randn(size_t(N), 23);
  auto x = randn(size_t(2 * 3 * K), 24);
  const std::vector<int64_t> ids = {9, 0, 4};
  Executable exe(parse_graph(R"(graph(%x: f32[2, 3, 256], %w: u8[6, 144], %b: f32[6], %t: u8[10, 272], %ids: i64[3]) {
  %y: f32[2, 3, 6] = qmatmul(%x, %w, %b) {format=q4_k}
  %e: f32[3, 256] = qembedding(%t, %ids) {format=q8_0}
  %tr: u8[5, 544] = reshape(%t) {shape=[5, 544]}
  %tf: f32[5, 544] = cast(%tr) {dtype=f32}
  return (%y, %e, %tf)
})"));
  auto out = exe.run({{x.data(), DType::f32, {2, 3, K}},
                      {w.data(), DType::u8, {N, 144}},
                      {bias.data(), DType::f32, {N}},
                      {t.data(), DType::u8, {V, 272}},
                      {ids.data(), DType::i64, {3}}},
                     {});
  ASSERT_EQ(out.size(), 3u);
  auto y = run_qmatmul(QFormat::q4_k, qisa_default(), 6, N, K, x, w, bias.data());
  const float* yo = static_cast<const float*>(out[0].data);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(yo[i], y[i]);
  auto table = dequant(QFormat::q8_0, t, V, K);
  const float* eo = static_cast<const float*>(out[1].data);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(eo[i * size_t(K) + size_t(k)], table[size_t(ids[i] * K + k)]);
  const float* to = static_cast<const float*>(out[2].data);
  for (size_t i = 0; i < t.size(); ++i) ASSERT_EQ(to[i], float(t[i]));
  // an id out of range is an error, not garbage
  const std::vector<int64_t> bad = {1, 10, 2};
  EXPECT_THROW(exe.run({{x.data(), DType::f32, {2, 3, K}},
                        {w.data(), DType::u8, {N, 144}},
                        {bias.data(), DType::f32, {N}},
                        {t.data(), DType::u8, {V, 272}},
                        {bad.data(), DType::i64, {3}}},
                       {}),
               Error);
  set_num_threads(1);
}

// Batch dims flatten into rows, also when a row has no values (int8 rows of K = 0: the
// output is the bias).
TEST(QuantOps, RuntimeBatchDimsAndEmptyRows) {
  Executable exe(parse_graph(R"(graph(%x: f32[2, 3, 0], %w: u8[2, 4], %b: f32[2]) {
  %y: f32[2, 3, 2] = qmatmul(%x, %w, %b) {format=int8}
  return (%y)
})"));
  const float x[1] = {0.0f}, b[2] = {0.5f, -3.0f};
  const float scales[2] = {1.0f, 2.0f};
  auto out = exe.run({{x, DType::f32, {2, 3, 0}}, {scales, DType::u8, {2, 4}}, {b, DType::f32, {2}}}, {});
  const float* y = static_cast<const float*>(out[0].data);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(y[2 * i], 0.5f);
    EXPECT_EQ(y[2 * i + 1], -3.0f);
  }
}

// Calibration's statistics and histogram of |x| (kernels/calibrate.cc) against a loop
// written here: zeros, NaN and infinities left out, values on bin edges and past the
// range, lengths that end inside a thread's chunk, one and two threads.
TEST(QuantCalibration, AbsStatsAndHistogramMatchALoop) {
  struct Bins {
    double range;
    int64_t bins;
  };
  for (int threads : {1, 2})
    for (int64_t n : {int64_t(1), int64_t(13), int64_t(1000), int64_t(3 * 16384 + 77)})
      for (Bins h : {Bins{4.0, 8}, Bins{3.0, 7}}) {  // a power-of-two width, and not
        set_num_threads(threads);
        auto x = randn(size_t(n), unsigned(n) + unsigned(threads));
        for (auto& v : x) v *= 3.0f;
        for (int64_t i = 0; i < n; i += 7) x[size_t(i)] = 0.0f;
        if (n > 10) {
          x[3] = NAN, x[5] = INFINITY, x[9] = -INFINITY;
          x[1] = 2.0f, x[2] = -0.5f;  // bin edges of range 4 over 8 bins
          x[4] = 100.0f;              // past the range: the last bin
          x[6] = -0.0f, x[8] = 1e-40f, x[10] = -std::numeric_limits<float>::quiet_NaN();  // denormal: bin 0
        }
        const AbsStats s = abs_stats(x.data(), n);
        float amax = 0.0f;
        int64_t zeros = 0, bad = 0;
        std::vector<int64_t> want(size_t(h.bins), 0);
        for (float v : x) {
          if (!std::isfinite(v)) {
            ++bad;
            continue;
          }
          const float a = std::fabs(v);
          amax = std::max(amax, a);
          if (a == 0.0f) {
            ++zeros;
            continue;
          }
          const double at = double(a) * (double(h.bins) / h.range);
          want[size_t(std::min<int64_t>(h.bins - 1, int64_t(std::floor(at))))] += 1;
        }
        EXPECT_EQ(s.amax, amax) << n;
        EXPECT_EQ(s.zeros, zeros) << n;
        EXPECT_EQ(s.nonfinite, bad) << n;
        std::vector<int64_t> got(size_t(h.bins), -1);
        abs_histogram(x.data(), n, h.range, h.bins, got.data());
        EXPECT_EQ(got, want) << n << " values, " << threads << " threads, " << h.bins << " bins";
      }
  // Far past the range (|x| * bins / range past 2^31 and 2^63), in the 8-wide loop and the
  // scalar tail: the last bin.
  std::vector<float> huge(19, 1e30f);
  huge[3] = 3.0e38f, huge[17] = -3.0e38f, huge[6] = 1e-30f, huge[7] = -2e-30f;  // two in bin 0
  std::vector<int64_t> got(4, -1);
  abs_histogram(huge.data(), int64_t(huge.size()), 1e-6, 4, got.data());
  EXPECT_EQ(got, (std::vector<int64_t>{2, 0, 0, 17}));
  // A range of denormal size: denormals are counted as values, not flushed to zero.
  const float tiny[9] = {1e-44f, 3e-44f, 5e-44f, 7e-44f, 1e-44f, 0.0f, -3e-44f, 1e-44f, 8e-45f};
  std::vector<int64_t> want_tiny(2, 0);
  for (float v : tiny)
    if (v != 0.0f) want_tiny[size_t(std::min(1.0, std::floor(double(std::fabs(v)) * (2 / 4e-44))))] += 1;
  std::vector<int64_t> got_tiny(2, -1);
  abs_histogram(tiny, 9, 4e-44, 2, got_tiny.data());
  EXPECT_EQ(got_tiny, want_tiny);
  EXPECT_GT(want_tiny[1], 0);
  EXPECT_THROW(abs_histogram(tiny, 9, -1.0, 2, got_tiny.data()), Error);
  EXPECT_THROW(abs_histogram(tiny, 9, NAN, 2, got_tiny.data()), Error);
  // Past 4096 bins one set of counts per thread (not four): the same counts.
  std::vector<float> wide = randn(5000, 3);
  std::vector<int64_t> w1(8192, -1), w2(8192, 0);
  abs_histogram(wide.data(), 5000, 8.0, 8192, w1.data());
  for (float v : wide)
    if (v != 0.0f) w2[size_t(std::min<int64_t>(8191, int64_t(std::floor(double(std::fabs(v)) * (8192 / 8.0)))))] += 1;
  EXPECT_EQ(w1, w2);
  set_num_threads(1);
}

// Sibling qmatmuls as parts (qmatmul_parts): one int8 GEMM over the weights' rows
// concatenated gives each part exactly what its own qmatmul gives, on every ISA, static
// and dynamic (a scale per row where the plan takes one), with and without biases and a
// GELU, rows around the tiles (a NaN row among them), one and two threads.
TEST(QuantKernels, Int8GemmPartsEqualSeparateGemms) {
  unsigned seed = 1200;
  const std::vector<int64_t> rows = {64, 32, 96};
  const int64_t N = 192;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (QIsa isa : simd_isas())
      for (int64_t K : {40, 100})
        for (int64_t M : {8, 13, 37})
          for (int v = 0; v < 4; ++v) {
            const bool bias = v & 1, gelu = v & 2;
            const Activation act = gelu ? Activation::kGelu : Activation::kNone;
            const float x_scale = v == 1 ? 0.05f : 0.0f;
            auto x = randn(size_t(M * K), seed++);
            x[size_t(2 * K + 7)] = NAN;  // row 2
            std::vector<std::vector<uint8_t>> w;
            std::vector<std::vector<float>> b;
            std::vector<uint8_t> all;
            for (int64_t r : rows) {
              w.push_back(random_weight(QFormat::int8, r, K, seed++));
              b.push_back(randn(size_t(r), seed++));
              all.insert(all.end(), w.back().begin(), w.back().end());
            }
            const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, N, K, isa, x_scale, false, x_scale == 0.0f);
            const PackedOperand packed = qmatmul_pack_int8(all.data(), N, K, isa);
            std::vector<std::vector<float>> got(rows.size());
            std::vector<QPart> parts;
            for (size_t i = 0; i < rows.size(); ++i) {
              got[i].assign(size_t(M * rows[i]), -7.0f);
              parts.push_back({bias ? b[i].data() : nullptr, got[i].data(), rows[i]});
            }
            qmatmul_parts(plan, x.data(), parts, packed, act);
            for (size_t i = 0; i < rows.size(); ++i) {
              const QMatmulPlan pi = qmatmul_plan(QFormat::int8, M, rows[i], K, isa, x_scale, false, x_scale == 0.0f);
              const PackedOperand pk = qmatmul_pack_int8(w[i].data(), rows[i], K, isa);
              std::vector<float> want(size_t(M * rows[i]));
              qmatmul(pi, x.data(), w[i].data(), bias ? b[i].data() : nullptr, want.data(), &pk, act);
              for (size_t j = 0; j < want.size(); ++j)
                ASSERT_TRUE(got[i][j] == want[j] || (std::isnan(got[i][j]) && std::isnan(want[j])))
                    << qisa_name(isa) << " threads " << threads << " K " << K << " M " << M << " variant " << v
                    << " part " << i << " at " << j << ": " << got[i][j] << " vs " << want[j];
            }
          }
  }
  // parts that do not cover the plan's columns, or are not whole blocks of 32
  const QMatmulPlan plan = qmatmul_plan(QFormat::int8, 8, 64, 40, qisa_default());
  if (qisa_default() != QIsa::kScalar) {
    const auto w = random_weight(QFormat::int8, 64, 40, 1);
    const PackedOperand packed = qmatmul_pack_int8(w.data(), 64, 40, qisa_default());
    std::vector<float> x(8 * 40), y(8 * 64);
    EXPECT_THROW(qmatmul_parts(plan, x.data(), {{nullptr, y.data(), 32}}, packed), Error);
    EXPECT_THROW(qmatmul_parts(plan, x.data(), {{nullptr, y.data(), 48}, {nullptr, y.data(), 16}}, packed), Error);
  }
  set_num_threads(1);
}

// The int8 GEMM split by rows (each thread quantizing its own) gives the values split by
// columns gives, bit for bit: dynamic rows (per row, per block, AVX2's pairs), static rows
// with and without x_mul, rows of no negative code on one thread only (AVX2's nonneg
// tiles there, the signed ones on the other), 8- and 7-bit weights (the w7 tiles), NaN
// rows, ReLU / GELU, output parts, rows that split unevenly and threads with more than
// one chunk of rows. The row path runs on both threads where parallel_for has two. And the
// rule: from 32 rows a thread, on weights of up to 1 MiB of codes, on more than one thread.
TEST(QuantKernels, Int8GemmSplitByRowsEqualsSplitByColumns) {
  struct Threads {  // 2 for the test, 1 again however it ends
    Threads() { set_num_threads(2); }
    ~Threads() { set_num_threads(1); }
  } threads;
  // How many threads a parallel_for gets here (1 in a build without OpenMP).
  auto ids_of = [](const std::function<void(const QBlockFn&)>& run) {
    std::mutex mu;
    std::set<std::thread::id> ids;
    run([&](int64_t, int64_t, int64_t, int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
    return ids.size();
  };
  const size_t team = ids_of([](const QBlockFn& f) { parallel_for(2, 1, [&](int64_t, int64_t) { f(0, 0, 0, 0); }); });
  unsigned seed = 2600;
  for (QIsa isa : simd_isas())
    for (int64_t M : {64, 67, 301, 601})
      for (int64_t K : {100, 416})
        for (int v = 0; v < 8; ++v) {
          const int64_t N = v % 2 ? 96 : 45;
          // 0, 1, 7: dynamic per row (AVX-512) or per block (AVX2: per 64 values, the pair
          // tiles); 2: per block, no row scale; 3: static; 4: static with x_mul; 5, 6: static,
          // x >= 0 in the first half of the rows (thread 0's)
          const bool row_scale = v < 2 || v == 7, stat = v >= 3 && v <= 6, w7 = v == 2 || v == 6 || v == 7;
          const Activation act = v == 1 ? Activation::kGelu : v == 3 ? Activation::kRelu : Activation::kNone;
          auto w = random_weight(QFormat::int8, N, K, seed++);
          if (w7) w = seven_bit(w, N, K);
          auto x = randn(size_t(M * K), seed++);
          if (v == 5 || v == 6)
            for (int64_t i = 0; i < (M / 2) * K; ++i) x[size_t(i)] = std::fabs(x[size_t(i)]);
          else
            x[size_t(3 * K + 5)] = NAN;  // row 3
          const auto bias = randn(size_t(N), seed++);
          const auto mul = positive_mul(K, seed++, 0.25f);
          QMatmulPlan rows = qmatmul_plan(QFormat::int8, M, N, K, isa, stat ? 0.04f : 0.0f, false, row_scale);
          ASSERT_TRUE(rows.split_rows) << qisa_name(isa) << " M " << M;
          QMatmulPlan cols = rows;
          cols.split_rows = false;
          const PackedOperand packed = qmatmul_pack_int8(w.data(), N, K, isa);
          ASSERT_EQ(packed.q8_max <= 63, w7);
          const float* xm = v == 4 ? mul.data() : nullptr;
          auto same = [&](const std::vector<float>& a, const std::vector<float>& b, const char* what) {
            for (size_t i = 0; i < a.size(); ++i)
              ASSERT_TRUE(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))
                  << what << " " << qisa_name(isa) << " M " << M << " K " << K << " variant " << v << " at " << i
                  << ": " << a[i] << " vs " << b[i];
          };
          std::vector<float> by_rows(size_t(M * N), -7.0f), by_cols(size_t(M * N), 7.0f);
          qmatmul(rows, x.data(), w.data(), bias.data(), by_rows.data(), &packed, act, xm);
          qmatmul(cols, x.data(), w.data(), bias.data(), by_cols.data(), &packed, act, xm);
          same(by_rows, by_cols, "qmatmul");
          if (v == 0) {  // the row path's blocks come from as many threads as parallel_for has
            std::vector<float> y(size_t(M * N));
            EXPECT_EQ(ids_of([&](const QBlockFn& f) { q8_gemm_by_rows(rows, x.data(), nullptr, packed, y.data(), f); }),
                      team);
          }
          if (N % 32) continue;
          std::vector<float> a(size_t(M * 64)), b(size_t(M * 32)), ca(size_t(M * 64)), cb(size_t(M * 32));
          qmatmul_parts(rows, x.data(), {{bias.data(), a.data(), 64}, {nullptr, b.data(), 32}}, packed, act, xm);
          qmatmul_parts(cols, x.data(), {{bias.data(), ca.data(), 64}, {nullptr, cb.data(), 32}}, packed, act, xm);
          same(a, ca, "parts");
          same(b, cb, "parts");
        }
  if (qisa_default() != QIsa::kScalar) {
    const QIsa isa = qisa_default();
    EXPECT_FALSE(qmatmul_plan(QFormat::int8, 63, 384, 384, isa).split_rows);  // under 32 rows a thread
    EXPECT_TRUE(qmatmul_plan(QFormat::int8, 64, 384, 1536, isa).split_rows);  // 576 KiB
    EXPECT_TRUE(qmatmul_plan(QFormat::int8, 64, 1024, 1024, isa).split_rows);  // 1 MiB
    EXPECT_FALSE(qmatmul_plan(QFormat::int8, 4096, 1024, 1056, isa).split_rows);
    set_num_threads(1);
    EXPECT_FALSE(qmatmul_plan(QFormat::int8, 4096, 384, 384, isa).split_rows);
  }
}

// fuse_qmatmul_siblings: Q, K and V reading one x become one qmatmul with parts (the
// outputs keep their ids); the runtime then gives what the separate qmatmuls give, bit
// for bit, on the int8 GEMM (24 rows, weights constant) and on the dot kernels (2 rows:
// the parts run one by one). Siblings that differ (a fourth with another x, an
// activation, rows not a multiple of 32) stay apart.
TEST(QuantOps, SiblingQmatmulsShareOneGemm) {
  set_num_threads(2);
  const int64_t K = 100;
  for (int64_t M : {2, 24}) {
    const std::string m = std::to_string(M);
    const std::string text = "graph(%x: f32[" + m + ", 100], %x2: f32[" + m + ", 100], %wq: u8[64, 104], "
        "%wk: u8[64, 104], %wv: u8[32, 104], %w40: u8[40, 104], %bq: f32[64], %bk: f32[64], %bv: f32[32]) {\n"
        "  %q: f32[" + m + ", 64] = qmatmul(%x, %wq, %bq) {format=int8, row_scale=[1]}\n"
        "  %k: f32[" + m + ", 64] = qmatmul(%x, %wk, %bk) {format=int8, row_scale=[1]}\n"
        "  %v: f32[" + m + ", 32] = qmatmul(%x, %wv, %bv) {format=int8, row_scale=[1]}\n"
        "  %o: f32[" + m + ", 64] = qmatmul(%x2, %wq, %bq) {format=int8, row_scale=[1]}\n"
        "  %g: f32[" + m + ", 64] = qmatmul(%x, %wk, %bk) {format=int8, row_scale=[1], activation=gelu}\n"
        "  %u: f32[" + m + ", 40] = qmatmul(%x, %w40) {format=int8, row_scale=[1]}\n"
        "  %s: f32[" + m + ", 64] = add(%q, %k)\n"
        "  return (%s, %v, %o, %g, %u)\n}";
    Graph g = parse_graph(text);
    ASSERT_EQ(fuse_qmatmul_siblings(g), 1);
    verify(g);
    int fused = 0, qmatmuls = 0;
    for (const Node& n : g.nodes) {
      if (n.op != Op::qmatmul) continue;
      ++qmatmuls;
      if (n.i("parts", 1) == 3) {
        ++fused;
        EXPECT_EQ(n.outputs.size(), 3u);
        EXPECT_EQ(n.inputs.size(), 7u);  // x, three weights, three biases
      }
    }
    EXPECT_EQ(fused, 1);
    EXPECT_EQ(qmatmuls, 4);  // q, k, v as one; o, g and u apart
    std::vector<std::vector<uint8_t>> w;
    for (int64_t r : {64, 64, 32, 40}) w.push_back(random_weight(QFormat::int8, r, K, unsigned(50 + r)));
    auto x = randn(size_t(M * K), 61), x2 = randn(size_t(M * K), 62);
    auto bq = randn(64, 63), bk = randn(64, 64), bv = randn(32, 65);
    const std::vector<InTensor> in = {{x.data(), DType::f32, {M, K}},        {x2.data(), DType::f32, {M, K}},
                                      {w[0].data(), DType::u8, {64, 104}},  {w[1].data(), DType::u8, {64, 104}},
                                      {w[2].data(), DType::u8, {32, 104}},  {w[3].data(), DType::u8, {40, 104}},
                                      {bq.data(), DType::f32, {64}},         {bk.data(), DType::f32, {64}},
                                      {bv.data(), DType::f32, {32}}};
    Executable a(g);
    a.set_constant_inputs({2, 3, 4, 5});
    auto ya = a.run(in, {});
    // the fused weights packed once as one (and %o's, %g's and %u's each on its own); none
    // for 2 rows (the dot kernels)
    const bool gemm = M >= kQ8GemmRows && qisa_default() != QIsa::kScalar;
    EXPECT_EQ(a.packed_bytes(), gemm ? size_t((64 + 64 + 32 + 64 + 64 + 40) * K) : 0u) << "M=" << M;
    Executable unpacked(g);  // weights not held constant: no packed weight, the parts one by one
    auto yu = unpacked.run(in, {});
    EXPECT_EQ(unpacked.packed_bytes(), 0u);
    // the separate qmatmuls, by the kernel
    auto one = [&](const float* xx, const std::vector<uint8_t>& ww, int64_t r, const float* bias, Activation act) {
      const QMatmulPlan p = qmatmul_plan(QFormat::int8, M, r, K, qisa_for(QFormat::int8, M, K), 0.0f, false, true);
      std::vector<float> y(size_t(M * r));
      if (qmatmul_reads_packed(p)) {
        const PackedOperand pk = qmatmul_pack_int8(ww.data(), r, K, p.isa);
        qmatmul(p, xx, ww.data(), bias, y.data(), &pk, act);
      } else {
        qmatmul(p, xx, ww.data(), bias, y.data(), nullptr, act);
      }
      return y;
    };
    auto one_unpacked = [&](const float* xx, const std::vector<uint8_t>& ww, int64_t r, const float* bias) {
      const QMatmulPlan p = qmatmul_plan(QFormat::int8, M, r, K, qisa_for(QFormat::int8, M, K), 0.0f, false, true);
      std::vector<float> y(size_t(M * r));
      qmatmul(p, xx, ww.data(), bias, y.data(), nullptr);
      return y;
    };
    const auto q = one(x.data(), w[0], 64, bq.data(), Activation::kNone);
    const auto k = one(x.data(), w[1], 64, bk.data(), Activation::kNone);
    const auto v = one(x.data(), w[2], 32, bv.data(), Activation::kNone);
    const float* s = static_cast<const float*>(ya[0].data);
    const float* vv = static_cast<const float*>(ya[1].data);
    for (int64_t i = 0; i < M * 64; ++i) ASSERT_EQ(s[i], q[size_t(i)] + k[size_t(i)]) << "M=" << M << " at " << i;
    for (int64_t i = 0; i < M * 32; ++i) ASSERT_EQ(vv[i], v[size_t(i)]) << "M=" << M << " at " << i;
    // unpacked, each part as its own qmatmul without a packed weight
    const auto qd = one_unpacked(x.data(), w[0], 64, bq.data()), kd = one_unpacked(x.data(), w[1], 64, bk.data()),
               vd = one_unpacked(x.data(), w[2], 32, bv.data());
    const float* su = static_cast<const float*>(yu[0].data);
    const float* vu = static_cast<const float*>(yu[1].data);
    for (int64_t i = 0; i < M * 64; ++i) ASSERT_EQ(su[i], qd[size_t(i)] + kd[size_t(i)]) << "unpacked M=" << M << " at " << i;
    for (int64_t i = 0; i < M * 32; ++i) ASSERT_EQ(vu[i], vd[size_t(i)]) << "unpacked M=" << M << " at " << i;
  }
  // inference refuses malformed parts
  auto expect_rejected = [](const std::string& body, const std::string& why) {
    expect_graph_rejected("graph(%x: f32[2, 64], %w: u8[32, 68], %w4: u8[4, 68], %wn: u8[32, 36], %b: f32[32])", body,
                          "return (%r, %t)", why);
  };
  expect_rejected("%r: f32[2, 32], %t: f32[2, 32] = qmatmul(%x, %w, %w, %b) {format=int8, parts=[2]}", "part(s)");
  expect_rejected("%r: f32[2, 32], %t: f32[2, 4] = qmatmul(%x, %w, %w4) {format=int8, parts=[2]}", "multiple of 32");
  expect_rejected("%r: f32[2, 32], %t: f32[2, 32] = qmatmul(%x, %w, %wn) {format=int8, parts=[2]}", "values per row");
  expect_rejected("%r: f32[2, 32], %t: f32[2, 32] = qmatmul(%x, %w, %w) {format=q8_0, parts=[2]}", "int8");
  // an activation reading one part stays apart (it would apply to every part)
  Graph parts = parse_graph(R"(graph(%x: f32[2, 64], %w: u8[32, 68]) {
  %q: f32[2, 32], %k: f32[2, 32] = qmatmul(%x, %w, %w) {format=int8, parts=[2]}
  %r: f32[2, 32] = relu(%q)
  return (%r, %k)
})");
  EXPECT_EQ(fuse_epilogue(parts), 0);
  set_num_threads(1);
}
