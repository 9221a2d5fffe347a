// Fast kernels against their scalar references, over odd sizes, tails and strides.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_ukernels.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"
#include "zenith/runtime.h"
#include "zenith/threadpool.h"

using namespace zenith;

namespace {
// A per-row (conv2d: per output channel) epilogue: scale, shift, activation and, given
// one, a residual whose rows are ld apart.
GemmEpilogue row_epilogue(const std::vector<float>& scale, const std::vector<float>& shift, Activation act,
                          const float* residual = nullptr, int64_t ld = 0) {
  GemmEpilogue ep;
  ep.row_scale = scale.data();
  ep.row_shift = shift.data();
  ep.act = act;
  ep.residual = residual;
  ep.ld_residual = ld;
  return ep;
}
}  // namespace

TEST(Kernels, SgemmIsaIsReported) {
  std::string isa = sgemm_isa();
  EXPECT_TRUE(isa == "avx2" || isa == "avx512") << isa;
  if (std::getenv("ZENITH_NO_AVX512")) EXPECT_EQ(isa, "avx2");
}

// Every micro-kernel of gemm_ukernels.def on its own (GemmUkernelCase: one kernel over
// the whole product) against ref_sgemm: row and column counts around the tile (tails
// in M and N, several panels), k in blocks of 16 and of 256 (a short last block),
// leading dimensions wider than the matrices, C overwritten and accumulated. A
// kernel whose ISA this CPU lacks is skipped, by name.
class GemmUkernels : public ::testing::TestWithParam<size_t> {};

TEST_P(GemmUkernels, MatchesReferenceOverOddShapesTailsAndStrides) {
  const GemmUkernelInfo& u = gemm_ukernels()[GetParam()];
  if (!u.supported) GTEST_SKIP() << u.name << " needs " << u.isa << ", which this CPU lacks";
  unsigned seed = 1;
  for (int64_t M : {int64_t(1), u.mr - 1, u.mr, u.mr + 1, 2 * u.mr + 3})
    for (int64_t N : {int64_t(1), u.nr - 1, u.nr, u.nr + 1, 2 * u.nr + 5})
      for (int64_t K : {0, 1, 7, 37, 300})
        for (int64_t kc : {16, 256})
          for (bool acc : {false, true}) {
            int64_t lda = K + 3, ldb = N + 5, ldc = N + 2;
            auto a = randn(size_t(M * lda), seed++), b = randn(size_t(K * ldb), seed++);
            auto c = randn(size_t(M * ldc), seed++);
            auto r = c;
            GemmUkernelCase(GetParam(), M, N, K, a.data(), lda, b.data(), ldb, kc).run(c.data(), ldc, acc);
            ref_sgemm(M, N, K, 1.0f, a.data(), lda, 1, b.data(), ldb, 1, r.data(), ldc, acc);
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < ldc; ++j)  // past column N: C's padding, untouched
                ASSERT_NEAR(c[size_t(i * ldc + j)], r[size_t(i * ldc + j)], 1e-4f * std::sqrt(float(K + 1)) * 4)
                    << u.name << " " << M << "x" << N << "x" << K << " kc " << kc << (acc ? " accumulate" : "")
                    << " at " << i << "," << j;
          }
}

INSTANTIATE_TEST_SUITE_P(Listed, GemmUkernels, ::testing::Range(size_t(0), gemm_ukernels().size()),
                         [](const ::testing::TestParamInfo<size_t>& p) { return gemm_ukernels()[p.param].name; });

TEST(Kernels, GemmUkernelListNamesItsTiles) {
  // Names say dtype, op, tile and ISA; every ISA sgemm can choose has kernels listed.
  std::set<std::string> names, isas;
  for (const GemmUkernelInfo& u : gemm_ukernels()) {
    std::string tile = "f32_gemm_" + std::to_string(u.mr) + "x" + std::to_string(u.nr) + "__" + u.isa;
    EXPECT_EQ(std::string(u.name).rfind(tile, 0), 0u) << u.name;
    EXPECT_TRUE(names.insert(u.name).second) << "listed twice: " << u.name;
    isas.insert(u.isa);
  }
  EXPECT_TRUE(isas.count(sgemm_isa())) << sgemm_isa();
}

TEST(Kernels, SgemmMatchesReferenceOnOddShapes) {
  const int64_t sizes[] = {1, 2, 3, 5, 6, 7, 15, 16, 17, 33, 97, 130, 300};
  unsigned seed = 1;
  for (int64_t M : sizes)
    for (int64_t N : {int64_t(1), int64_t(5), int64_t(16), int64_t(17), int64_t(40), int64_t(129)})
      for (int64_t K : {int64_t(1), int64_t(7), int64_t(64), int64_t(257), int64_t(600)}) {
        if (M * N * K > 4000000) continue;
        auto a = randn(size_t(M * K), seed++), b = randn(size_t(K * N), seed++);
        std::vector<float> c(size_t(M * N)), r(size_t(M * N));
        sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, c.data(), N, false);
        ref_sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, r.data(), N, false);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], r[i], 1e-4f * std::sqrt(float(K)) * 4) << M << "x" << N << "x" << K << " at " << i;
      }
}

TEST(Kernels, SgemmStridesAlphaAccumulate) {
  // A transposed (column-major), B transposed, alpha != 1, accumulating into C with ldc > N.
  for (int64_t M : {3, 8, 45})
    for (int64_t N : {2, 19, 33})
      for (int64_t K : {1, 9, 300}) {
        auto at = randn(size_t(K * M), 7), bt = randn(size_t(N * K), 8);
        int64_t ldc = N + 3;
        auto c = randn(size_t(M * ldc), 9);
        auto r = c;
        sgemm(M, N, K, 0.5f, at.data(), 1, M, bt.data(), 1, K, c.data(), ldc, true);
        ref_sgemm(M, N, K, 0.5f, at.data(), 1, M, bt.data(), 1, K, r.data(), ldc, true);
        for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], r[i], 2e-4f * std::sqrt(float(K)));
      }
}

TEST(Kernels, SgemmSkinnyTimesTransposedWeight) {
  // x @ W^T with up to 4 rows (decode) takes the blocked dot-product path, with more
  // the weight-rows kernel (W in place); x @ B with row-major B and <= 4 rows the
  // register-blocked path: every row-block size (4, 3, 2, 1 remainder), W-row tails, k
  // tails (< 8, not a multiple of 8), alpha and accumulate, on one thread and two.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t M : {1, 2, 3, 4, 5, 7, 16, 31, 32, 33})
      for (int64_t N : {1, 3, 8, 9, 17, 300})
        for (int64_t K : {1, 5, 8, 13, 64, 65, 257}) {
          auto a = randn(size_t(M * K), unsigned(M * 131 + N * 7 + K)), w = randn(size_t(N * K), unsigned(K));
          int64_t ldc = N + 2;
          // w as W^T (the nn.Linear layout: dot-product path) and as a row-major [K, N] B
          // (GPT-2 Conv1D layout: register-blocked path)
          for (auto [b_rs, b_cs] : {std::pair<int64_t, int64_t>{1, K}, {N, 1}})
            for (bool acc : {false, true}) {
              auto c = randn(size_t(M * ldc), 5);
              auto r = c;
              sgemm(M, N, K, 0.75f, a.data(), K, 1, w.data(), b_rs, b_cs, c.data(), ldc, acc);
              ref_sgemm(M, N, K, 0.75f, a.data(), K, 1, w.data(), b_rs, b_cs, r.data(), ldc, acc);
              for (size_t i = 0; i < c.size(); ++i)
                ASSERT_NEAR(c[i], r[i], 1e-4f * std::sqrt(float(K)) * 4)
                    << M << "x" << N << "x" << K << " b_rs=" << b_rs << " acc=" << acc << " threads=" << threads
                    << " at " << i;
            }
        }
  }
  set_num_threads(1);
}

TEST(Kernels, SgemmPackedTransposedB) {
  // Enough rows for the packed path with W^T packed by 8 x 8 register transposes: column
  // tails inside a panel (< 8 left), k tails (kc not a multiple of 8), several panels
  // and k blocks, accumulate.
  for (int64_t M : {33, 64, 130})
    for (int64_t N : {8, 31, 32, 33, 100})
      for (int64_t K : {7, 8, 9, 256, 257, 600}) {
        auto a = randn(size_t(M * K), unsigned(M + N + K)), w = randn(size_t(N * K), unsigned(N * K));
        for (bool acc : {false, true}) {
          auto c = randn(size_t(M * N), 3);
          auto r = c;
          sgemm(M, N, K, 1.0f, a.data(), K, 1, w.data(), 1, K, c.data(), N, acc);
          ref_sgemm(M, N, K, 1.0f, a.data(), K, 1, w.data(), 1, K, r.data(), N, acc);
          for (size_t i = 0; i < c.size(); ++i)
            ASSERT_NEAR(c[i], r[i], 1e-4f * std::sqrt(float(K)) * 4) << M << "x" << N << "x" << K << " at " << i;
        }
      }
}

TEST(Kernels, SgemmWeightInPlaceMatchesReference) {
  // x @ W^T with W read in place (C^T = W X^T, W the broadcast operand) against the scalar
  // reference: W's rows not a multiple of the 6-row (AVX2) or 12-row (AVX-512) panel (a
  // last, short panel of W, which is sized exactly), X's rows not a multiple of 16 or 32
  // (last panels of 1, 8, 12 and 16 rows run the half-width kernel, of 17 and 24 rows the
  // full one; kernels_forced_avx2 runs this on AVX2) and more than one block of them (300,
  // 600), k tails and several k blocks (both ISAs' tiles take K in equal blocks of at
  // most 768: 1024, 1025 and 3072 in 2, 2 (520 + 505) and 4, and K = 5 in one), A with a
  // row stride past K, C with ldc > N, A transposed, alpha, accumulate, the
  // epilogue, on 1 and 2 threads. K up to 1024 prefetches the next panel of W
  // (kPrefetchWRowsMaxK), 1025 not. With AVX-512 on an 8-way L1 (Zen 4), W's rows 1024 and
  // 3072 floats apart crowd an L1 set and run the 8-row tile instead of the 12-row one
  // (rows_crowd_l1). A thread's panels of W are written to C in groups of kStripGroup (8):
  // groups cut short by the thread's end and by the short last panel (205 rows: 18 panels
  // of 12 (AVX-512) or 35 of 6 (AVX2), split 9 + 9 or 17 + 18 between two threads).
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{49, 7, 300}, {56, 769, 64}, {300, 130, 513},
                           {600, 20, 259}, {128, 768, 768}, {48, 33, 40}, {40, 100, 1024}, {40, 100, 1025},
                           {130, 21, 3072}, {20, 205, 16}, {37, 40, 5}})
      for (int variant = 0; variant < 3; ++variant) {  // overwrite; accumulate; A transposed (a_rs 1)
        bool acc = variant == 1, at = variant == 2;
        ASSERT_FALSE(sgemm_reads_packed(M, 1, K)) << M;  // both ISAs have the kernel
        int64_t lda = at ? M + 3 : K + 3, ldc = N + 5;
        int64_t a_rs = at ? 1 : lda, a_cs = at ? lda : 1;
        auto a = randn(size_t((at ? K : M) * lda), unsigned(M + K)), w = randn(size_t(N * K), unsigned(N));
        auto shift = randn(size_t(N), 9);
        auto c = randn(size_t(M * ldc), 3);
        auto r = c;
        GemmEpilogue ep;
        ep.col_shift = shift.data();
        ep.act = Activation::kRelu;
        sgemm(M, N, K, 0.5f, a.data(), a_rs, a_cs, w.data(), 1, K, c.data(), ldc, acc, nullptr, &ep);
        ref_sgemm(M, N, K, 0.5f, a.data(), a_rs, a_cs, w.data(), 1, K, r.data(), ldc, acc);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            float want = std::max(0.0f, r[size_t(m * ldc + n)] + shift[size_t(n)]);
            ASSERT_NEAR(c[size_t(m * ldc + n)], want, 1e-4f * std::sqrt(float(K)) * 4)
                << M << "x" << N << "x" << K << " at " << m << "," << n << " threads " << threads;
          }
        for (int64_t m = 0; m < M; ++m)  // the padding between rows of C is untouched
          for (int64_t n = N; n < ldc; ++n) ASSERT_EQ(c[size_t(m * ldc + n)], r[size_t(m * ldc + n)]);
      }
  }
}

TEST(Kernels, SgemmRowMajorAInPlaceMatchesReference) {
  // alpha == 1 and a row-major A with at most 1024 columns of B: the blocked driver
  // reads A's rows in place (no packing). Against the scalar reference: a row stride
  // past K, A's rows not a multiple of the 6-row panel (last panels of 1..5 rows),
  // k tails and several k blocks, more panels of A than one L2 block (300 rows: two
  // equal blocks), both branches (threads own B's column panels, N >= 128; or split
  // A's rows, N < 128), B packed in advance or not, accumulate, the epilogue, and
  // N = 1025 (A packed) next to 1024, on 1 and 2 threads.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{7, 33, 9}, {47, 200, 300}, {300, 130, 513},
                           {301, 40, 259}, {64, 1024, 70}, {64, 1025, 70}, {256, 256, 256}})
      for (int variant = 0; variant < 3; ++variant) {  // plain; accumulate + epilogue; B packed
        bool acc = variant == 1;
        int64_t lda = K + 3, ldc = N + 5;
        auto a = randn(size_t(M * lda), unsigned(M + K)), b = randn(size_t(K * N), unsigned(N));
        auto shift = randn(size_t(N), 9);
        auto c = randn(size_t(M * ldc), 3);
        auto r = c;
        GemmEpilogue ep;
        ep.col_shift = shift.data();
        ep.act = Activation::kRelu;
        PackedOperand packed;
        if (variant == 2) packed = sgemm_pack_b(K, N, b.data(), N, 1);
        sgemm(M, N, K, 1.0f, a.data(), lda, 1, b.data(), N, 1, c.data(), ldc, acc, variant == 2 ? &packed : nullptr,
              acc ? &ep : nullptr);
        ref_sgemm(M, N, K, 1.0f, a.data(), lda, 1, b.data(), N, 1, r.data(), ldc, acc);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            float want = r[size_t(m * ldc + n)];
            if (acc) want = std::max(0.0f, want + shift[size_t(n)]);
            ASSERT_NEAR(c[size_t(m * ldc + n)], want, 1e-4f * std::sqrt(float(K)) * 4)
                << M << "x" << N << "x" << K << " variant " << variant << " at " << m << "," << n << " threads "
                << threads;
          }
        for (int64_t m = 0; m < M; ++m)  // the padding between rows of C is untouched
          for (int64_t n = N; n < ldc; ++n) ASSERT_EQ(c[size_t(m * ldc + n)], r[size_t(m * ldc + n)]);
      }
  }
  set_num_threads(1);
}

// A GemmBSource over a row-major matrix: the panels sgemm_b_source asks for, counted.
struct MatrixSource {
  const float* b;
  int64_t ldb;
  mutable std::atomic<int64_t> panels{0};
  static void pack(const void* self, int64_t k0, int64_t kc, int64_t n0, int64_t nr, int64_t nr_max, float* dst) {
    auto& s = *static_cast<const MatrixSource*>(self);
    ++s.panels;
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t j = 0; j < nr_max; ++j) dst[k * nr_max + j] = j < nr ? s.b[(k0 + k) * s.ldb + n0 + j] : 0.0f;
  }
};

TEST(Kernels, SgemmBSourceMatchesReference) {
  // B produced panel by panel (the implicit GEMM of conv2d) against the scalar reference:
  // both branches of the driver (threads own column panels; few column panels, A's rows
  // split), A taller than one L2 block (B's panels built again per block), k tails and
  // several k blocks, A packed in advance or not, the epilogue, on 1 and 2 threads.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{7, 300, 9}, {64, 3136, 147}, {300, 200, 513},
                           {512, 49, 300}, {13, 17, 260}})
      for (bool pack_a : {false, true}) {
        auto a = randn(size_t(M * K), unsigned(M + K)), b = randn(size_t(K * N), unsigned(N));
        auto shift = randn(size_t(M), 5);
        int64_t ldc = N + 2;
        std::vector<float> c(size_t(M * ldc), 7.0f), r = c;
        GemmEpilogue ep;
        ep.row_shift = shift.data();
        ep.act = Activation::kRelu;
        MatrixSource src{b.data(), N};
        PackedOperand pa;
        if (pack_a) pa = sgemm_pack_a(M, K, a.data(), K, 1);
        sgemm_b_source(M, N, K, a.data(), K, 1, GemmBSource{MatrixSource::pack, &src}, c.data(), ldc,
                       pack_a ? &pa : nullptr, &ep);
        ref_sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, r.data(), ldc, false);
        EXPECT_GT(src.panels.load(), 0);
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < N; ++n)
            ASSERT_NEAR(c[size_t(m * ldc + n)], std::max(0.0f, r[size_t(m * ldc + n)] + shift[size_t(m)]),
                        1e-4f * std::sqrt(float(K)) * 4)
                << M << "x" << N << "x" << K << " at " << m << "," << n << " threads " << threads;
          for (int64_t n = N; n < ldc; ++n) ASSERT_EQ(c[size_t(m * ldc + n)], 7.0f);
        }
      }
  }
  set_num_threads(1);
}

TEST(Kernels, Conv3x3WinogradMatchesDirectReference) {
  // F(2x2, 3x3) against a scalar direct convolution (stride 1, padding 1), with the
  // epilogue (per-channel scale and shift, a residual with its own row stride, ReLU):
  // odd and even map sizes (clipped last tiles), a map smaller than a tile, channel
  // counts not a multiple of any panel, on 1 and 2 threads.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [C, OC, H, W] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 5, 1, 1}, {7, 9, 5, 6},
                               {33, 40, 13, 15}, {64, 64, 14, 14}, {17, 70, 8, 3}})
      for (bool with_ep : {false, true}) {
        auto x = randn(size_t(C * H * W), unsigned(C + H)), w = randn(size_t(OC * C * 9), unsigned(OC));
        auto scale = randn(size_t(OC), 4), shift = randn(size_t(OC), 5);
        int64_t ldr = H * W + 2;
        auto res = randn(size_t(OC * ldr), 6);
        GemmEpilogue ep;
        if (with_ep) {
          ep.row_scale = scale.data();
          ep.row_shift = shift.data();
          ep.residual = res.data();
          ep.ld_residual = ldr;
          ep.act = Activation::kRelu;
        }
        std::vector<float> out(size_t(OC * H * W), NAN), out_kept(out.size(), NAN);
        conv3x3_winograd(x.data(), C, H, W, w.data(), OC, out.data(), ep);
        // The same with the filters transformed and packed in advance, as the runtime keeps them.
        PackedOperand kept = conv3x3_winograd_pack(OC, C, w.data());
        conv3x3_winograd(x.data(), C, H, W, w.data(), OC, out_kept.data(), ep, &kept);
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out_kept[i], out[i], 1e-5f * (1.0f + std::fabs(out[i]))) << "kept filters, at " << i;
        for (int64_t oc = 0; oc < OC; ++oc)
          for (int64_t y = 0; y < H; ++y)
            for (int64_t xx = 0; xx < W; ++xx) {
              double sum = 0;
              for (int64_t ic = 0; ic < C; ++ic)
                for (int64_t ky = 0; ky < 3; ++ky)
                  for (int64_t kx = 0; kx < 3; ++kx) {
                    int64_t iy = y + ky - 1, ix = xx + kx - 1;
                    if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                    sum += double(x[size_t((ic * H + iy) * W + ix)]) * w[size_t(((oc * C + ic) * 3 + ky) * 3 + kx)];
                  }
              double want = sum;
              if (with_ep) want = std::max(0.0, sum * scale[size_t(oc)] + shift[size_t(oc)] + res[size_t(oc * ldr + y * W + xx)]);
              ASSERT_NEAR(out[size_t((oc * H + y) * W + xx)], want, 2e-4 * std::sqrt(double(C * 9)) * 4)
                  << C << "x" << OC << "x" << H << "x" << W << " at " << oc << "," << y << "," << xx << " ep " << with_ep;
            }
      }
  }
  set_num_threads(1);
}

TEST(Kernels, SgemmPrepackedBMatchesReference) {
  // B packed once (sgemm_pack_b) against the scalar reference: both layouts of B, few
  // rows (5 and 16: with B packed, the driver takes them from the skinny kernels), column
  // tails inside a panel, k tails, several k blocks, more columns than one NC block
  // (3100 > 3072), the row-split branch (few column panels, many rows), alpha,
  // accumulate, on 1 and 2 threads.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{5, 100, 77}, {16, 768, 300}, {33, 31, 7},
                           {64, 100, 257}, {130, 48, 600}, {300, 40, 64}, {40, 3100, 20}, {128, 768, 300}})
      for (bool trans : {false, true}) {
        auto a = randn(size_t(M * K), unsigned(M + N)), b = randn(size_t(N * K), unsigned(N * K));
        int64_t b_rs = trans ? 1 : N, b_cs = trans ? K : 1;
        // W^T (trans) is read in place where the machine has that kernel, so the runtime
        // does not pack it; a B packed anyway is still honoured.
        if (!trans) ASSERT_TRUE(sgemm_reads_packed(M, b_rs, b_cs)) << M;
        PackedOperand packed = sgemm_pack_b(K, N, b.data(), b_rs, b_cs);
        for (bool acc : {false, true}) {
          auto c = randn(size_t(M * N), 3);
          auto r = c;
          sgemm(M, N, K, 0.5f, a.data(), K, 1, b.data(), b_rs, b_cs, c.data(), N, acc, &packed);
          ref_sgemm(M, N, K, 0.5f, a.data(), K, 1, b.data(), b_rs, b_cs, r.data(), N, acc);
          for (size_t i = 0; i < c.size(); ++i)
            ASSERT_NEAR(c[i], r[i], 1e-4f * std::sqrt(float(K)) * 4)
                << M << "x" << N << "x" << K << " trans " << trans << " at " << i;
        }
      }
  }
  set_num_threads(1);
}

// The epilogue computed from ref_sgemm's sums with libm's functions.
float ref_activation(float x, Activation act) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x > 0 ? x : 0.0f;
    case Activation::kGelu: return float(0.5 * x * (1.0 + std::erf(double(x) / std::sqrt(2.0))));
    case Activation::kGeluTanh:
      return float(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * double(x) * x * x))));
    case Activation::kSilu: return float(x / (1.0 + std::exp(-double(x))));
    case Activation::kTanh: return float(std::tanh(double(x)));
    case Activation::kRelu6: return std::min(std::max(x, 0.0f), 6.0f);
    case Activation::kHardsigmoid: return std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Activation::kHardswish: return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
  }
  return NAN;
}

TEST(Kernels, SgemmEpilogueMatchesReference) {
  // act(sum * row_scale[m] + row_shift[m] + col_shift[n] (+ residual[m, n], its own row
  // stride)) on every path (x @ W^T from 5 rows: the in-place strip): the skinny
  // kernels (1 and 3 rows, both layouts of B), the blocked driver with threads owning
  // columns (k tails, several k blocks, row and column tails, more rows than one
  // L2 block of A: 600; several groups of column panels per thread, the last one short,
  // at one k block, 40 x 1000 x 70, and at three, 20 x 700 x 600), its row split (few
  // column panels), a prepacked B, K = 0, ldc > N, accumulate; 1 and 2 threads. On the
  // in-place strip, rows of X filling whole panels (32, 64: GELU runs over the strip at
  // once) and not (33, 300), and blocks of X after the first (200 x 40 x 600 on AVX2:
  // 13 panels in blocks of 6, the last a half panel; 300 and 600 rows on AVX-512).
  const Activation acts[] = {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kGeluTanh,
                             Activation::kSilu, Activation::kTanh, Activation::kRelu6, Activation::kHardsigmoid,
                             Activation::kHardswish};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 300, 77}, {3, 40, 600}, {33, 129, 300},
                           {300, 40, 64}, {7, 17, 0}, {130, 48, 513}, {600, 129, 40}, {40, 1000, 70},
                           {20, 700, 600}, {32, 50, 100}, {64, 30, 900}, {200, 40, 600}})
      for (bool trans : {false, true})
        for (int variant = 0; variant < 4; ++variant)  // column shift; row scale and shift; all three; + residual
          for (Activation act : acts) {
            int64_t ldc = N + 3, ldr = N + 1;
            auto a = randn(size_t(M * K), unsigned(M + K)), b = randn(size_t(N * K), unsigned(N + 1));
            auto scale = randn(size_t(M), 7), rshift = randn(size_t(M), 8), cshift = randn(size_t(N), 9);
            auto res = randn(size_t(M * ldr), 10);
            int64_t b_rs = trans ? 1 : N, b_cs = trans ? K : 1;
            GemmEpilogue ep;
            ep.act = act;
            if (variant != 1) ep.col_shift = cshift.data();
            if (variant != 0) {
              ep.row_scale = scale.data();
              ep.row_shift = rshift.data();
            }
            if (variant == 3) {
              ep.residual = res.data();
              ep.ld_residual = ldr;
            }
            PackedOperand packed;
            bool use_packed = M == 130 && K > 0;
            if (use_packed) packed = sgemm_pack_b(K, N, b.data(), b_rs, b_cs);
            for (bool acc : {false, true}) {
              auto c = randn(size_t(M * ldc), 3);
              auto r = c;
              sgemm(M, N, K, 0.5f, a.data(), K, 1, b.data(), b_rs, b_cs, c.data(), ldc, acc,
                    use_packed ? &packed : nullptr, &ep);
              ref_sgemm(M, N, K, 0.5f, a.data(), K, 1, b.data(), b_rs, b_cs, r.data(), ldc, acc);
              for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < ldc; ++n) {
                  float want = r[size_t(m * ldc + n)];
                  if (n < N) {
                    float s = ep.row_scale ? scale[size_t(m)] : 1.0f, t = ep.row_shift ? rshift[size_t(m)] : 0.0f;
                    float add = (ep.col_shift ? cshift[size_t(n)] : 0.0f) + (ep.residual ? res[size_t(m * ldr + n)] : 0.0f);
                    want = ref_activation(want * s + t + add, act);
                  }
                  ASSERT_NEAR(c[size_t(m * ldc + n)], want, 2e-4f * std::sqrt(float(K + 1)) * 4)
                      << M << "x" << N << "x" << K << " trans " << trans << " variant " << variant << " act "
                      << int(act) << " acc " << acc << " at " << m << "," << n;
                }
            }
          }
  }
  set_num_threads(1);
}

TEST(Kernels, SgemmEpilogueKeepsSignedZeroAndNaNAlongTheRow) {
  // The epilogue's vector activations, value for value as activation.h's one-value
  // functions give them, in a row's 8-wide body and in its tail (13 values: 8 + 5): a -0
  // (0 scaled by -1, shifted by -0) stays -0 through no activation, ReLU6 and
  // hardswish and becomes +0 through ReLU (hardsigmoid gives 0.5); a NaN stays NaN.
  using Fn = float (*)(float);
  const std::pair<Activation, Fn> acts[] = {{Activation::kNone, [](float x) { return x; }},
                                            {Activation::kRelu, relu_f},
                                            {Activation::kRelu6, relu6_f},
                                            {Activation::kHardsigmoid, hard_sigmoid},
                                            {Activation::kHardswish, hard_swish}};
  for (auto [act, fn] : acts)
    for (int64_t nan_at : {int64_t(2), int64_t(10)}) {
      const int64_t w = 13;
      std::vector<float> c(size_t(w), 0.0f);
      c[1] = 7.5f, c[4] = -2.0f, c[9] = 3.0f, c[12] = -0.25f;
      c[size_t(nan_at)] = NAN;
      float scale = -1.0f, shift = -0.0f;
      std::vector<float> want(c.size());
      for (size_t j = 0; j < c.size(); ++j) want[j] = fn(c[j] * scale + shift);
      GemmEpilogue ep;
      ep.row_scale = &scale;
      ep.row_shift = &shift;
      ep.act = act;
      sgemm_epilogue_block(ep, c.data(), w, 0, 0, 1, w);
      for (size_t j = 0; j < c.size(); ++j) {
        if (std::isnan(want[j])) {
          ASSERT_TRUE(std::isnan(c[j])) << "act " << int(act) << " at " << j;
          continue;
        }
        ASSERT_EQ(c[j], want[j]) << "act " << int(act) << " at " << j;
        ASSERT_EQ(std::signbit(c[j]), std::signbit(want[j])) << "act " << int(act) << " at " << j;
      }
    }
}

TEST(Kernels, SgemmTransposedXMatchesRowMajorBitForBit) {
  // x @ W^T with x given transposed (x^T's rows lda apart, as a feed-forward pair's down
  // projection reads h^T) against the same x row-major, bit for bit: the weight-rows
  // driver reads x^T's whole panels in place where it takes them (AVX-512: up to 64 rows)
  // and packs the rest (a last, partial panel; every panel of longer x), and packing
  // splits a panel's k block across threads where there are fewer blocks than threads.
  // Rows in whole panels and not, one to three k blocks, lda = M and more, accumulating
  // and with a bias, 1 and 2 threads; and against the scalar reference.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t M : {16, 32, 45, 64, 65, 96})
      for (int64_t K : {9, 800, 1700})
        for (int64_t pad : {0, 5})
          for (bool acc : {false, true}) {
            const int64_t N = 25, lda = M + pad;
            auto x = randn(size_t(M * K), unsigned(M * 7 + K)), w = randn(size_t(N * K), unsigned(K));
            auto bias = randn(size_t(N), 3);
            std::vector<float> xt(size_t(K * lda), std::nanf(""));  // padding past M: not in C
            for (int64_t m = 0; m < M; ++m)
              for (int64_t k = 0; k < K; ++k) xt[size_t(k * lda + m)] = x[size_t(m * K + k)];
            GemmEpilogue ep;
            ep.col_shift = bias.data();
            auto c = randn(size_t(M * N), 4);
            auto ct = c, r = c;
            sgemm(M, N, K, 1.0f, x.data(), K, 1, w.data(), 1, K, c.data(), N, acc, nullptr, acc ? nullptr : &ep);
            sgemm(M, N, K, 1.0f, xt.data(), 1, lda, w.data(), 1, K, ct.data(), N, acc, nullptr, acc ? nullptr : &ep);
            ref_sgemm(M, N, K, 1.0f, x.data(), K, 1, w.data(), 1, K, r.data(), N, acc);
            for (int64_t i = 0; i < M * N; ++i) {
              ASSERT_EQ(std::memcmp(&ct[size_t(i)], &c[size_t(i)], sizeof(float)), 0)
                  << M << "x" << N << "x" << K << " lda " << lda << (acc ? " accumulate" : "") << " at " << i
                  << " threads " << threads;
              const float want = r[size_t(i)] + (acc ? 0.0f : bias[size_t(i % N)]);
              ASSERT_NEAR(c[size_t(i)], want, 1e-4f * std::sqrt(float(K)) * 4);
            }
          }
  }
  set_num_threads(1);
}

TEST(Kernels, SgemmTransposedOutputIsSgemmTransposed) {
  // sgemm_ct writes C^T (ct[n * ldct + m]) with the values sgemm writes to C, bit for bit,
  // epilogue included, and matches the scalar reference. Where the weight-rows driver
  // runs (x @ W^T, more than the skinny kernels' rows) its strips are computed where they
  // go: X's rows whole panels (32, 64, 128) or not (5, 17, 33, 77: a last panel of 1-16
  // rows through the half-width kernel, of 17-31 through the full one, storing only its
  // columns), several blocks of X's rows (600), W's rows not a multiple of the panel (7,
  // 13, 205), k tails and several k blocks, K 3072 (the 8-row tile where W's rows crowd
  // an L1 set), A transposed (the hand-off's second GEMM reads C^T so), ldct > M (the
  // padding untouched) and ldct = M (with GELU: its pass over the whole strip at once
  // where X's rows fill it). Elsewhere C is made, then transposed: few rows (1, 4), B
  // packed, B not W^T, K = 0. 1 and 2 threads.
  const Activation acts[] = {Activation::kNone, Activation::kGelu, Activation::kRelu};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{5, 13, 64}, {17, 40, 300}, {33, 7, 513},
                           {32, 205, 16}, {64, 24, 1025}, {77, 96, 384}, {128, 36, 3072}, {600, 30, 259},
                           {1, 40, 70}, {4, 17, 33}, {40, 13, 0}})
      for (int variant = 0; variant < 4; ++variant) {  // W^T in place; A transposed; B packed; B row-major
        const bool at = variant == 1, packed_b = variant == 2, b_rows = variant == 3;
        const int64_t lda = at ? M + 3 : K + 3;
        const int64_t a_rs = at ? 1 : lda, a_cs = at ? lda : 1;
        const int64_t b_rs = b_rows ? N : 1, b_cs = b_rows ? 1 : K;
        auto a = randn(size_t(std::max<int64_t>(at ? K : M, 1) * lda), unsigned(M + K));
        auto b = randn(size_t(N * K), unsigned(N));
        auto shift = randn(size_t(N), 9);
        PackedOperand pk;
        if (packed_b && K > 0) pk = sgemm_pack_b(K, N, b.data(), b_rs, b_cs);
        const PackedOperand* pkp = packed_b && K > 0 ? &pk : nullptr;
        for (Activation act : acts) {
          const int64_t ldct = act == Activation::kGelu ? M : M + 3;
          GemmEpilogue ep;
          ep.col_shift = shift.data();
          ep.act = act;
          std::vector<float> c(size_t(M * N)), r(size_t(M * N)), ct = randn(size_t(N * ldct), 5);
          const auto ct0 = ct;
          sgemm(M, N, K, 0.5f, a.data(), a_rs, a_cs, b.data(), b_rs, b_cs, c.data(), N, false, pkp, &ep);
          sgemm_ct(M, N, K, 0.5f, a.data(), a_rs, a_cs, b.data(), b_rs, b_cs, ct.data(), ldct, pkp, &ep);
          ref_sgemm(M, N, K, 0.5f, a.data(), a_rs, a_cs, b.data(), b_rs, b_cs, r.data(), N, false);
          for (int64_t n = 0; n < N; ++n) {
            for (int64_t m = 0; m < M; ++m) {
              const float got = ct[size_t(n * ldct + m)];
              ASSERT_EQ(std::memcmp(&got, &c[size_t(m * N + n)], sizeof got), 0)
                  << M << "x" << N << "x" << K << " variant " << variant << " act " << int(act) << " at " << m
                  << "," << n << ": " << got << " vs " << c[size_t(m * N + n)] << " threads " << threads;
              ASSERT_NEAR(got, ref_activation(r[size_t(m * N + n)] + shift[size_t(n)], act),
                          1e-4f * std::sqrt(float(K + 1)) * 4);
            }
            for (int64_t m = M; m < ldct; ++m) ASSERT_EQ(ct[size_t(n * ldct + m)], ct0[size_t(n * ldct + m)]);
          }
        }
      }
  }
  set_num_threads(1);
}

TEST(Kernels, SgemmPartsIsSgemmPerPart) {
  // sgemm_parts gives each part what sgemm gives it alone (x @ W_i^T + bias_i), bit for
  // bit: parts whose rows end inside a panel and inside a group of strips, an empty part
  // (left out of the GEMM), parts without a bias, more than 16 parts (run 16 at a time), few rows of x (part by
  // part), K = 0; 1 and 2 threads.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, K, P] : {std::tuple<int64_t, int64_t, int64_t>{33, 70, 3}, {64, 300, 5}, {3, 40, 3}, {20, 0, 2},
                           {40, 16, 19}})
      for (bool bias : {true, false}) {
        std::vector<std::vector<float>> w, b, c, r;
        std::vector<GemmPart> parts;
        auto x = randn(size_t(M * K), unsigned(M + K));
        for (int64_t i = 0; i < P; ++i) {
          const int64_t n = i == 1 ? 0 : 5 + 11 * i;
          w.push_back(randn(size_t(n * K), unsigned(i + 1)));
          b.push_back(randn(size_t(n), unsigned(i + 50)));
          c.push_back(std::vector<float>(size_t(M * n), 7.0f));
          r.push_back(c.back());
        }
        for (int64_t i = 0; i < P; ++i) {
          parts.push_back({w[size_t(i)].data(), int64_t(w[size_t(i)].size()) / std::max<int64_t>(K, 1),
                           c[size_t(i)].data(), bias ? b[size_t(i)].data() : nullptr});
          if (K == 0) parts.back().n = i == 1 ? 0 : 5 + 11 * i;
        }
        sgemm_parts(M, K, x.data(), K, parts.data(), P);
        for (int64_t i = 0; i < P; ++i) {
          const int64_t n = parts[size_t(i)].n;
          GemmEpilogue ep;
          ep.col_shift = bias ? b[size_t(i)].data() : nullptr;
          sgemm(M, n, K, 1.0f, x.data(), K, 1, w[size_t(i)].data(), 1, K, r[size_t(i)].data(), n, false, nullptr, &ep);
          for (int64_t j = 0; j < M * n; ++j)
            ASSERT_EQ(std::memcmp(&c[size_t(i)][size_t(j)], &r[size_t(i)][size_t(j)], sizeof(float)), 0)
                << M << "x" << K << " part " << i << " of " << P << " bias " << bias << " at " << j << ": "
                << c[size_t(i)][size_t(j)] << " vs " << r[size_t(i)][size_t(j)] << " threads " << threads;
        }
      }
  }
  set_num_threads(1);
}

TEST(Kernels, SgemmPrepackedAMatchesReference) {
  // A packed once (a convolution's weight): row tails inside a panel, k tails, several
  // k blocks, both driver branches (many column panels; few column panels, many rows).
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{33, 31, 7}, {64, 49, 576}, {130, 196, 257},
                           {300, 40, 64}, {17, 3136, 27}})
      for (bool acc : {false, true}) {
        auto a = randn(size_t(M * K), unsigned(M + K)), b = randn(size_t(K * N), unsigned(N));
        ASSERT_TRUE(sgemm_reads_packed(M, N, 1)) << M;
        PackedOperand packed = sgemm_pack_a(M, K, a.data(), K, 1);
        auto c = randn(size_t(M * N), 5);
        auto r = c;
        sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, c.data(), N, acc, &packed);
        ref_sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, r.data(), N, acc);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], r[i], 1e-4f * std::sqrt(float(K)) * 4) << M << "x" << N << "x" << K << " at " << i;
      }
  }
  set_num_threads(1);
}

TEST(Kernels, SgemmPrepackedOperandForAnotherOperandIsRejected) {
  auto a = randn(64 * 16, 1), b = randn(16 * 40, 2), b2 = b;
  std::vector<float> c(64 * 40);
  PackedOperand packed = sgemm_pack_b(16, 40, b.data(), 40, 1);
  EXPECT_THROW(sgemm(64, 40, 16, 1.0f, a.data(), 16, 1, b2.data(), 40, 1, c.data(), 40, false, &packed), Error);
  EXPECT_THROW(sgemm(64, 40, 16, 1.0f, a.data(), 16, 1, b.data(), 1, 16, c.data(), 40, false, &packed), Error);
  PackedOperand pa = sgemm_pack_a(64, 16, a.data(), 16, 1);  // packed without alpha: alpha must be 1
  EXPECT_THROW(sgemm(64, 40, 16, 0.5f, a.data(), 16, 1, b.data(), 40, 1, c.data(), 40, false, &pa), Error);
  EXPECT_NO_THROW(sgemm(64, 40, 16, 1.0f, a.data(), 16, 1, b.data(), 40, 1, c.data(), 40, false, &pa));
}

TEST(Kernels, SgemmLargePackedABufferIsReleasedAndReallocated) {
  // A of 4100 x 4100 (over the 16M-float cap on the kept packing buffer): the buffer is
  // freed after the call and allocated again by the next; both calls stay correct.
  const int64_t M = 4100, N = 9, K = 4100;
  auto a = randn(size_t(M * K), 11), b = randn(size_t(K * N), 12);
  std::vector<float> r(size_t(M * N));
  ref_sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, r.data(), N, false);
  for (int call = 0; call < 2; ++call) {
    std::vector<float> c(size_t(M * N));
    sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, c.data(), N, false);
    for (size_t i = 0; i < c.size(); i += 7) ASSERT_NEAR(c[i], r[i], 1e-4f * std::sqrt(float(K)) * 4) << i;
  }
}

TEST(Kernels, SgemmEmptyDims) {
  std::vector<float> c(6, 7.0f);
  sgemm(2, 3, 0, 1.0f, nullptr, 0, 1, nullptr, 3, 1, c.data(), 3, false);
  for (float v : c) EXPECT_EQ(v, 0.0f);
  sgemm(0, 3, 4, 1.0f, nullptr, 4, 1, nullptr, 3, 1, c.data(), 3, false);  // nothing to do, no crash
}

TEST(Kernels, StridedCopyMatchesIndexing) {
  // Transposing a 3-d tensor via strides.
  std::vector<float> src(2 * 3 * 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = float(i);
  std::vector<float> dst(src.size());
  strided_copy(dst.data(), src.data(), 4, {5, 2, 3}, {1, 15, 5});
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(dst[size_t((k * 2 + i) * 3 + j)], src[size_t(i * 15 + j * 5 + k)]);
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  set_num_threads(2);
  for (int64_t n : {1, 2, 3, 17, 1000}) {
    std::vector<int> hits(size_t(n), 0);
    parallel_for(n, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ++hits[size_t(i)];
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
  // Nested calls run serially instead of deadlocking; errors propagate.
  std::atomic<int> inner{0};
  parallel_for(4, 1, [&](int64_t lo, int64_t hi) {
    parallel_for(10, 1, [&](int64_t a, int64_t b) { inner += int(b - a); });
  });
  EXPECT_EQ(inner.load(), 20);
#if !defined(_OPENMP)
  set_num_threads(1);
  GTEST_SKIP() << "built without OpenMP (the ThreadSanitizer build): parallel_for runs each call inline";
#endif
  EXPECT_THROW(parallel_for(8, 1, [](int64_t lo, int64_t) {
                 if (lo > 0) throw std::runtime_error("boom");
               }),
               std::runtime_error);
  set_num_threads(1);
}

TEST(Kernels, SgemmThreadedMatchesReference) {
  set_num_threads(2);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{2, 700, 33}, {13, 300, 70}, {200, 20, 50},
                         {97, 129, 257}}) {
    auto a = randn(size_t(M * K), 3), b = randn(size_t(K * N), 4);
    std::vector<float> c(size_t(M * N)), r(size_t(M * N));
    sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, c.data(), N, false);
    ref_sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, r.data(), N, false);
    for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], r[i], 1e-4f * std::sqrt(float(K)) * 4);
  }
  set_num_threads(1);
}

// GELU (exact) against libm's erfc in double: relative error at every x whose result is
// a normal float (the left tail included, which 1 + erf would round to 0), the special
// values; and gelu_exact_n (its chunked loops, on the ISA this run chose: ctest runs
// Kernels.* with AVX2 forced too) equal to the one-loop form bit for bit, any length and
// offset, in place or not.
TEST(Kernels, GeluMatchesLibmAndItsArrayKernel) {
  // Relative error: 1e-6, plus in the left tail the float spacing of the exponent
  // -x^2 / 2 (6e-8 of it), which exp turns into relative error (5e-6 at x = -13); on the
  // right erfc(-z) = 2 - erfc(z) has no such term.
  std::vector<float> xs;
  for (int i = -400000; i <= 400000; ++i) xs.push_back(float(i) * 5e-5f * (i % 5 == 0 ? 20.0f : 1.0f));  // to +-400
  std::vector<float> ys(xs.size());
  ref_gelu_exact_n(xs.data(), ys.data(), int64_t(xs.size()));
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], ref = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    if (std::fabs(ref) < 1e-36) continue;
    const double err = std::fabs(double(ys[i]) - ref) / std::fabs(ref) / (1e-6 + (x < 0 ? 6e-8 * 0.5 * x * x : 0.0));
    if (err > worst) worst = err, worst_x = xs[i];
  }
  EXPECT_LT(worst, 1.0) << "at x = " << worst_x;
  const float special[] = {NAN, -INFINITY, INFINITY, 0.0f, -0.0f, -200.0f};
  float got[6];
  gelu_exact_n(special, got, 6);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_TRUE(std::isnan(got[1]));  // -inf * 0, as PyTorch gives
  EXPECT_EQ(got[2], INFINITY);
  EXPECT_TRUE(got[3] == 0.0f && !std::signbit(got[3]));
  EXPECT_TRUE(got[4] == 0.0f && std::signbit(got[4]));
  EXPECT_EQ(got[5], 0.0f);

  std::vector<float> x = randn(1000, 5);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 8;  // tails
  x[3] = NAN, x[4] = INFINITY, x[5] = -INFINITY, x[6] = -0.0f, x[7] = -30.0f;
  std::vector<float> want(x.size());
  ref_gelu_exact_n(x.data(), want.data(), int64_t(x.size()));
  for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 127, 128, 129, 300, 997})
    for (int64_t off : {0, 1, 3}) {
      std::vector<float> y(size_t(n), 1.0f), inplace(x.begin() + off, x.begin() + off + n);
      gelu_exact_n(x.data() + off, y.data(), n);
      gelu_exact_n(inplace.data(), inplace.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float w = want[size_t(off + i)];
        if (std::isnan(w)) {  // a NaN, its payload aside
          ASSERT_TRUE(std::isnan(y[size_t(i)]) && std::isnan(inplace[size_t(i)])) << "n=" << n << " at " << i;
          continue;
        }
        ASSERT_EQ(std::memcmp(&y[size_t(i)], &w, 4), 0) << "n=" << n << " off=" << off << " at " << i;
        ASSERT_EQ(std::memcmp(&inplace[size_t(i)], &w, 4), 0) << "in place, n=" << n << " at " << i;
      }
    }
}

TEST(VMath, MatchesLibmWithinBounds) {
  double worst_exp = 0, worst_erf = 0, worst_tanh = 0;
  for (int i = -200000; i <= 200000; ++i) {
    float x = float(i) * 1e-4f * (i % 7 == 0 ? 10.0f : 1.0f);  // dense near 0, up to +-200
    float e = vexp(x), re = std::exp(x);
    if (std::isfinite(re) && re > 1e-30f) worst_exp = std::max(worst_exp, std::fabs(double(e) - re) / re);
    worst_erf = std::max(worst_erf, std::fabs(double(verf(x)) - std::erf(double(x))));
    double rt = std::tanh(double(x));
    worst_tanh = std::max(worst_tanh, std::fabs(double(vtanh(x)) - rt) / std::max(std::fabs(rt), 1e-3));
  }
  double worst_exp_nonpos = 0;
  for (int i = -1000000; i <= 0; ++i) {
    float x = float(i) * 1e-4f, re = std::exp(x);
    if (re > 1e-30f) worst_exp_nonpos = std::max(worst_exp_nonpos, std::fabs(double(vexp_nonpos(x)) - re) / re);
  }
  EXPECT_LT(worst_exp_nonpos, 3e-7);
  EXPECT_EQ(vexp_nonpos(0.0f), 1.0f);
  EXPECT_EQ(vexp_nonpos(-INFINITY), 0.0f);
  EXPECT_EQ(vexp_nonpos(-1000.0f), 0.0f);
  EXPECT_TRUE(std::isnan(vexp_nonpos(NAN)));
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_erf, 5e-7);
  double worst_erf_rel = 0;  // relative, near 0 (1/erf(x) reads it so; found by the fuzzer)
  for (int i = 1; i <= 100000; ++i) {
    float x = float(i) * 1e-5f;
    worst_erf_rel = std::max(worst_erf_rel, std::fabs(double(verf(x)) - std::erf(double(x))) / std::erf(double(x)));
  }
  EXPECT_LT(worst_erf_rel, 1e-6);
  EXPECT_LT(worst_tanh, 1e-6);
  EXPECT_EQ(vexp(-INFINITY), 0.0f);
  EXPECT_EQ(vexp(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(vexp(NAN)) && std::isnan(verf(NAN)) && std::isnan(vtanh(NAN)));
  EXPECT_EQ(verf(INFINITY), 1.0f);
  EXPECT_TRUE(std::signbit(verf(-0.0f)));
  EXPECT_TRUE(std::signbit(vtanh(-0.0f)) && vtanh(-0.0f) == 0.0f && !std::signbit(vtanh(0.0f)));
  EXPECT_EQ(vtanh(-INFINITY), -1.0f);
  EXPECT_EQ(vsigmoid(-INFINITY), 0.0f);
}

namespace {
// run_sdpa against ref_sdpa on one configuration. q/k/v are (B, H, L, E) for layout 0,
// (B, L, H, E) for layout 1; mask_shape empty for none. Rows the reference makes NaN
// (every key masked) must be NaN in both.
// fill: the mask's values: 0 random (a quarter false or -inf); 1 masking nothing (all
// true; +0 and -0); 2 the same but for its last entry (false; 0.5). specials: V holds a
// NaN at the last key, +inf a third of the way and -inf at key 1, in columns that differ
// between kv heads (b, hk): 0, 1 and 2 moved by b + 2 hk (so a head read for another
// fails); the output's infinities must then be equal.
void check_sdpa(int64_t B, int64_t H, int64_t Hk, int64_t L, int64_t S, int64_t E, int64_t Ev, bool causal,
                int layout, std::vector<int64_t> mask_shape, bool bool_mask, unsigned seed, int fill = 0,
                bool specials = false) {
  auto dims = [&](int64_t heads, int64_t rows, int64_t width) {
    return layout == 1 ? std::vector<int64_t>{B, rows, heads, width} : std::vector<int64_t>{B, heads, rows, width};
  };
  auto q = randn(size_t(B * H * L * E), seed), k = randn(size_t(B * Hk * S * E), seed + 1),
       v = randn(size_t(B * Hk * S * Ev), seed + 2);
  if (specials) {
    auto v_at = [&](int64_t b, int64_t h, int64_t j, int64_t c) -> float& {
      return v[size_t(layout == 1 ? ((b * S + j) * Hk + h) * Ev + c : ((b * Hk + h) * S + j) * Ev + c)];
    };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hk; ++h) {
        const int64_t c = b + 2 * h;
        v_at(b, h, S - 1, c % Ev) = NAN;
        v_at(b, h, S / 3, (c + 1) % Ev) = INFINITY;
        v_at(b, h, std::min<int64_t>(1, S - 1), (c + 2) % Ev) = -INFINITY;
      }
  }
  std::vector<TensorRef> in = {{q.data(), DType::f32, dims(H, L, E)},
                               {k.data(), DType::f32, dims(Hk, S, E)},
                               {v.data(), DType::f32, dims(Hk, S, Ev)}};
  Node n;
  n.op = Op::sdpa;
  n.set_int("is_causal", causal);
  n.set_int("layout", layout);
  n.set_int("has_mask", !mask_shape.empty());
  if (seed % 2) n.set_float("scale", 0.3);
  int64_t mn = 1;
  for (int64_t d : mask_shape) mn *= d;
  auto fmask = randn(size_t(mn), seed + 3);
  std::unique_ptr<bool[]> bmask(new bool[size_t(mn)]);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < mn; ++i) {
    bmask[size_t(i)] = rng() % 4 != 0;
    if (rng() % 5 == 0) fmask[size_t(i)] = -INFINITY;
    if (fill) {
      bmask[size_t(i)] = true;
      fmask[size_t(i)] = i % 2 ? -0.0f : 0.0f;
    }
  }
  if (fill == 2) {
    bmask[size_t(mn - 1)] = false;
    fmask[size_t(mn - 1)] = 0.5f;
  }
  if (!mask_shape.empty()) in.push_back({bool_mask ? static_cast<void*>(bmask.get()) : fmask.data(),
                                         bool_mask ? DType::b8 : DType::f32, mask_shape});
  else in.push_back(in[0]);
  std::vector<float> got(size_t(B * H * L * Ev), 7.0f), want(got.size(), -7.0f);
  std::vector<TensorRef> out = {{got.data(), DType::f32, dims(H, L, Ev)}};
  run_node(n, in, out);
  out[0].data = want.data();
  ref_sdpa(prepare_node(n, in, out).ctx(n, in, out));
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      ASSERT_EQ(got[i], want[i]) << "at " << i;
      continue;
    }
    ASSERT_NEAR(got[i], want[i], 2e-5f + 2e-5f * std::fabs(want[i]))
        << "B" << B << " H" << H << "/" << Hk << " L" << L << " S" << S << " E" << E << "/" << Ev << " causal "
        << causal << " layout " << layout << " mask rank " << mask_shape.size() << " at " << i;
  }
}
}  // namespace

TEST(Kernels, SdpaMatchesReference) {
  // Query counts on both sides of the tiled path's threshold and its 16/32-query
  // blocks, key counts past one key tile (128 / 192 keys: the running max is rescaled),
  // head widths not a multiple of a vector, Ev != E, grouped-query heads, both layouts.
  unsigned seed = 11;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t L : {1, 3, 7, 8, 17, 33, 70})
      for (int64_t S : {1, 5, 40, 200, 300})
        for (auto [E, Ev] : {std::pair<int64_t, int64_t>{3, 3}, {32, 32}, {64, 40}}) {
          for (bool causal : {false, true}) check_sdpa(1, 2, 2, L, S, E, Ev, causal, int(seed % 2), {}, false, seed++);
          check_sdpa(2, 4, 2, L, S, E, Ev, false, 1, {}, false, seed++);
        }
  }
  set_num_threads(2);
}

TEST(Kernels, SdpaMasksMatchReference) {
  // Padding masks (one value per key), full (B, H, L, S) masks, bool and additive,
  // with -inf entries: rows with every key masked are NaN, as in PyTorch.
  unsigned seed = 101;
  for (int64_t L : {2, 9, 40})
    for (int64_t S : {3, 33, 260})
      for (bool bool_mask : {false, true}) {
        check_sdpa(2, 3, 3, L, S, 16, 16, false, 0, {2, 1, 1, S}, bool_mask, seed++);
        check_sdpa(2, 3, 3, L, S, 16, 24, false, 1, {2, 3, L, S}, bool_mask, seed++);
        check_sdpa(1, 2, 1, L, S, 8, 8, true, 0, {L, S}, bool_mask, seed++);
      }
}

TEST(Kernels, SdpaNonFiniteValuesMatchReference) {
  // NaN and infinities in V, among them keys a causal query does not see: each masked key
  // weighs 0, and 0 x NaN or inf is NaN, by the definition (ref_sdpa) and in PyTorch's
  // CPU kernel up to 512 keys. The tiled path skips a causal block's later keys and had left them out
  // (-inf where both say NaN; found by the fuzzer). Rows and tiled paths, one and two
  // key tiles, fewer queries than keys, both layouts with two kv heads and two images
  // (head strides), grouped-query heads, with and without a mask, at 1 and 2 threads.
  unsigned seed = 501;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [L, S] : {std::pair<int64_t, int64_t>{3, 3}, {17, 17}, {17, 40}, {40, 40}, {200, 200}})
      for (bool causal : {false, true})
        for (int layout : {0, 1}) {
          check_sdpa(1, 2, 1, L, S, 8, 8, causal, layout, {}, false, seed++, 0, true);
          check_sdpa(2, 2, 2, L, S, 16, 24, causal, layout, {}, false, seed++, 0, true);
          check_sdpa(2, 4, 2, L, S, 16, 16, causal, layout, {L, S}, true, seed++, 0, true);
        }
  }
  set_num_threads(2);
}

TEST(Kernels, SdpaMasksThatMaskNothingMatchReference) {
  // A mask that changes no score (all true, all +-0: transformers pass one for unpadded
  // inputs) is skipped; one whose last entry masks or adds is not. Rows path (L = 2)
  // and tiled path (L = 40), padding and full masks, bool and additive.
  unsigned seed = 301;
  for (int fill : {1, 2})
    for (int64_t L : {2, 40})
      for (bool bool_mask : {false, true}) {
        check_sdpa(2, 3, 3, L, 33, 16, 16, false, 0, {2, 1, 1, 33}, bool_mask, seed++, fill);
        check_sdpa(1, 2, 2, L, 33, 16, 16, false, 1, {1, 1, L, 33}, bool_mask, seed++, fill);
      }
}

TEST(Kernels, SdpaFullyMaskedRowsAreNaN) {
  // Every key masked for some queries, in the tiled path (L = 40): those rows NaN,
  // the others finite and equal to the reference.
  check_sdpa(1, 1, 1, 40, 50, 16, 16, false, 0, {1, 1, 40, 50}, true, 3);
  int64_t L = 40, S = 50, E = 16;
  auto q = randn(size_t(L * E), 1), k = randn(size_t(S * E), 2), v = randn(size_t(S * E), 3);
  std::unique_ptr<bool[]> m(new bool[size_t(L * S)]);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) m[size_t(i * S + j)] = i % 3 != 0;  // rows 0, 3, 6, ... see no key
  std::vector<TensorRef> in = {{q.data(), DType::f32, {1, 1, L, E}},
                               {k.data(), DType::f32, {1, 1, S, E}},
                               {v.data(), DType::f32, {1, 1, S, E}},
                               {m.get(), DType::b8, {1, 1, L, S}}};
  Node n;
  n.op = Op::sdpa;
  n.set_int("has_mask", 1);
  std::vector<float> o(size_t(L * E));
  std::vector<TensorRef> out = {{o.data(), DType::f32, {1, 1, L, E}}};
  run_node(n, in, out);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t e = 0; e < E; ++e) EXPECT_EQ(std::isnan(o[size_t(i * E + e)]), i % 3 == 0) << i << "," << e;
}

TEST(Kernels, ReduceSumMatchesReference) {
  // Float sums over leading, middle, trailing and several dims, with row tails (< 8),
  // strips past 512 columns, means, NaN propagation, on one thread and two.
  struct Case {
    std::vector<int64_t> shape, dims;
  };
  const Case cases[] = {{{37, 1030}, {0}}, {{5, 13}, {1}}, {{3, 17, 600}, {1}}, {{4, 6, 9}, {0, 2}},
                        {{2, 3, 5}, {}}, {{256, 3}, {0}}, {{1, 700}, {1}}, {{9, 1}, {0}}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& cs : cases)
      for (bool mean : {false, true}) {
        int64_t n = 1;
        for (int64_t d : cs.shape) n *= d;
        auto x = randn(size_t(n), unsigned(n));
        if (n > 40) x[size_t(n / 3)] = NAN;
        std::vector<bool> red(cs.shape.size(), cs.dims.empty());
        for (int64_t d : cs.dims) red[size_t(d)] = true;
        std::vector<int64_t> oshape;
        int64_t count = 1;
        for (size_t d = 0; d < cs.shape.size(); ++d) {
          if (red[d]) count *= cs.shape[d];
          else oshape.push_back(cs.shape[d]);
        }
        int64_t on = n / count;
        std::vector<double> want(size_t(on), 0.0);
        std::vector<int64_t> strides = contiguous_strides(cs.shape);
        for (int64_t i = 0; i < n; ++i) {  // output index of element i: its kept coordinates
          int64_t o = 0;
          for (size_t d = 0; d < cs.shape.size(); ++d)
            if (!red[d]) o = o * cs.shape[d] + (i / strides[d]) % cs.shape[d];
          want[size_t(o)] += x[size_t(i)];
        }
        std::vector<float> got(static_cast<size_t>(on));
        Node node;
        node.op = mean ? Op::reduce_mean : Op::reduce_sum;
        node.set_ints("dims", std::vector<SymInt>(cs.dims.begin(), cs.dims.end()));
        std::vector<TensorRef> in = {{x.data(), DType::f32, cs.shape}};
        std::vector<TensorRef> out = {{got.data(), DType::f32, oshape}};
        run_node(node, in, out);
        for (int64_t o = 0; o < on; ++o) {
          double w = mean ? want[size_t(o)] / double(count) : want[size_t(o)];
          if (std::isnan(w)) {
            ASSERT_TRUE(std::isnan(got[size_t(o)])) << o;
            continue;
          }
          ASSERT_NEAR(got[size_t(o)], w, 1e-5 * (1 + std::fabs(w))) << "case " << cs.shape.size() << "d n=" << n << " at " << o;
        }
      }
  }
  set_num_threads(2);
}

TEST(Kernels, DepthwisePlaneMatchesReference) {
  // conv2d's depthwise path against its bounds-checked scalar loop: odd sizes (rows of 1
  // to 61 outputs: whole blocks of 8 or 16 lanes and partial ones; heights not a
  // multiple of the 4-row block), kernels 1, 3 and 5 wide (3 and 5 with row dilation 1
  // and strides 1, 2 take the unrolled loop, the rest the general one), strides 1, 2
  // (the phase-split copy's vector paths) and 3, padding none / half / over the
  // kernel's reach on one side, dilation 1 and 2. Nothing is written past the plane.
  // The shapes alternate on one thread, so the buffer's re-zeroing on a new geometry is
  // exercised too.
  unsigned seed = 11;
  for (auto [H, W] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {17, 33}, {12, 122}, {9, 64}})
    for (int64_t K : {1, 3, 5})
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t d : {1, 2})
          for (int64_t p : {int64_t(0), K / 2, K}) {
            int64_t OH = (H + 2 * p - d * (K - 1) - 1) / s + 1, OW = (W + 2 * p - d * (K - 1) - 1) / s + 1;
            if (H + 2 * p < d * (K - 1) + 1 || W + 2 * p < d * (K - 1) + 1) continue;
            for (bool dilate_rows : {true, false}) {
              const int64_t dh = dilate_rows ? d : 1;
              if (!dilate_rows && d == 1) continue;
              OH = (H + 2 * p - dh * (K - 1) - 1) / s + 1;
              if (H + 2 * p < dh * (K - 1) + 1) continue;
              DepthwiseGeom g{H, W, K, K, OH, OW, s, s, p, p, dh, d};
              auto x = randn(size_t(H * W), seed++), k = randn(size_t(K * K), seed++);
              const size_t n = size_t(OH * OW), guard = 40;
              std::vector<float> got(n + guard, 7.0f), want(n, -7.0f);
              depthwise_plane(g, x.data(), k.data(), got.data());
              ref_depthwise_plane(g, x.data(), k.data(), want.data());
              for (size_t i = 0; i < n; ++i)
                ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
                    << H << "x" << W << " k" << K << " s" << s << " dh" << dh << " dw" << d << " p" << p << " at " << i;
              for (size_t i = n; i < n + guard; ++i) ASSERT_EQ(got[i], 7.0f) << "written past the plane at " << i;
            }
          }
}

TEST(Kernels, DepthwisePlaneAppliesTheEpilogue) {
  // The epilogue conv2d hands the plane (as row `ch` of a GEMM-shaped output): scale and
  // shift with no activation, ReLU, ReLU6 (applied in registers), GELU and a residual
  // (applied to each block's rows once written), against the plain plane followed by
  // sgemm_epilogue_block. Values straddle 0 and 6 so both clamps bite; a NaN input
  // stays NaN through each activation.
  unsigned seed = 31;
  const int64_t C = 3, ch = 2;
  for (auto [H, s] : {std::pair<int64_t, int64_t>{23, 1}, {40, 2}, {7, 1}})
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kRelu6, Activation::kGelu})
      for (bool residual : {false, true}) {
        const int64_t OH = (H + 2 - 3) / s + 1;
        DepthwiseGeom g{H, H, 3, 3, OH, OH, s, s, 1, 1, 1, 1};
        auto x = randn(size_t(H * H), seed++), k = randn(size_t(9), seed++);
        for (auto& v : x) v *= 3.0f;
        x[size_t(H + 1)] = NAN;
        auto scale = randn(size_t(C), seed++), shift = randn(size_t(C), seed++);
        auto res = randn(size_t(C * OH * OH), seed++);
        const GemmEpilogue ep = row_epilogue(scale, shift, act, residual ? res.data() : nullptr, OH * OH);
        std::vector<float> got(size_t(OH * OH)), want(got.size());
        depthwise_plane(g, x.data(), k.data(), got.data(), &ep, ch);
        depthwise_plane(g, x.data(), k.data(), want.data());
        sgemm_epilogue_block(ep, want.data(), OH * OH, ch, 0, 1, OH * OH);
        int nans = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          if (std::isnan(want[i])) {
            ASSERT_TRUE(std::isnan(got[i])) << i;
            ++nans;
            continue;
          }
          ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
              << "H " << H << " s " << s << " act " << int(act) << " residual " << residual << " at " << i;
        }
        ASSERT_GT(nans, 0);
      }
  // An exact -0 (a zero plane scaled by -1, shifted by -0) stays -0 through ReLU, ReLU6
  // and no activation, as relu_f, clamp_f and the identity keep it (and PyTorch's relu).
  for (Activation act : {Activation::kRelu, Activation::kRelu6, Activation::kNone}) {
    DepthwiseGeom g{20, 20, 3, 3, 20, 20, 1, 1, 1, 1, 1, 1};
    std::vector<float> x(400, 0.0f), k(9, 1.0f), got(400, 7.0f), want(400, 7.0f);
    float scale = -1.0f, shift = -0.0f;
    GemmEpilogue ep;
    ep.row_scale = &scale;
    ep.row_shift = &shift;
    ep.act = act;
    depthwise_plane(g, x.data(), k.data(), got.data(), &ep, 0);
    depthwise_plane(g, x.data(), k.data(), want.data());
    sgemm_epilogue_block(ep, want.data(), 400, 0, 0, 1, 400);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], 0.0f);
      ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "act " << int(act) << " at " << i;
    }
    ASSERT_TRUE(std::signbit(got[0])) << "act " << int(act);
  }
}

TEST(Kernels, DepthwiseChannelsMatchReference) {
  // conv2d's depthwise path for small maps, a group of channels at a time (vectors
  // across channels), against the scalar loop per channel: 1 to all lanes of channels
  // (8 x 8 transposes and their scalar edges), planes a gap apart in x, kernels 1, 3
  // and 5, strides 1 to 3, padding none / half / over the kernel's reach, dilation 1
  // and 2 on either axis, rows of fewer and more than the 8 pixels computed at a time.
  // Nothing is written past the group's planes; geometries alternate on one thread (the
  // buffer's re-zeroing).
  unsigned seed = 41;
  const int64_t lanes = depthwise_channel_lanes();
  for (auto [H, W] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {14, 14}, {9, 20}, {5, 3}})
    for (int64_t K : {1, 3, 5})
      for (int64_t s = 1; s <= 3; ++s)
        for (auto [dh, dw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 1}, {1, 2}})
          for (int64_t p : {int64_t(0), K / 2, K}) {
            if (H + 2 * p < dh * (K - 1) + 1 || W + 2 * p < dw * (K - 1) + 1) continue;
            const int64_t OH = (H + 2 * p - dh * (K - 1) - 1) / s + 1, OW = (W + 2 * p - dw * (K - 1) - 1) / s + 1;
            DepthwiseGeom g{H, W, K, K, OH, OW, s, s, p, p, dh, dw};
            for (int64_t nch : {int64_t(1), lanes / 2 + 1, lanes}) {
              // Output planes a gap of 5 apart (conv2d_pw_dw writes a band of rows of
              // each image plane): the gaps are left as they were.
              const int64_t x_stride = H * W + 3, plane = OH * OW, out_stride = plane + 5;
              auto x = randn(size_t(nch * x_stride), seed++), k = randn(size_t(nch * K * K), seed++);
              const size_t n = size_t(nch * out_stride), guard = 40;
              std::vector<float> got(n + guard, 7.0f), want(static_cast<size_t>(plane));
              depthwise_channels(g, x.data(), x_stride, k.data(), got.data(), out_stride, nch);
              for (int64_t c = 0; c < nch; ++c) {
                ref_depthwise_plane(g, x.data() + c * x_stride, k.data() + c * K * K, want.data());
                for (int64_t i = 0; i < plane; ++i)
                  ASSERT_NEAR(got[size_t(c * out_stride + i)], want[size_t(i)],
                              1e-5f * (1.0f + std::fabs(want[size_t(i)])))
                      << H << "x" << W << " k" << K << " s" << s << " d" << dh << "," << dw << " p" << p << " nch "
                      << nch << " channel " << c << " at " << i;
                for (int64_t i = plane; i < out_stride; ++i)
                  ASSERT_EQ(got[size_t(c * out_stride + i)], 7.0f) << "written between the planes";
              }
              for (size_t i = n; i < n + guard; ++i) ASSERT_EQ(got[i], 7.0f) << "written past the planes at " << i;
            }
          }
  // Padding above and left only, the windows reaching past x below and right (conv2d_pw_dw's
  // bands: the last band of an image reads the image's bottom padding).
  for (auto [H, W, ph, pw, OH, OW, s] : {std::array<int64_t, 7>{5, 6, 0, 0, 5, 6, 1}, {9, 7, 1, 0, 5, 4, 2},
                                         {4, 30, 0, 1, 3, 30, 1}}) {
    DepthwiseGeom g{H, W, 3, 3, OH, OW, s, s, ph, pw, 1, 1};
    const int64_t nch = lanes - 1, plane = OH * OW;
    auto x = randn(size_t(nch * H * W), seed++), k = randn(size_t(nch * 9), seed++);
    std::vector<float> got(static_cast<size_t>(nch * plane)), want(static_cast<size_t>(plane));
    depthwise_channels(g, x.data(), H * W, k.data(), got.data(), plane, nch);
    for (int64_t c = 0; c < nch; ++c) {
      ref_depthwise_plane(g, x.data() + c * H * W, k.data() + c * 9, want.data());
      for (int64_t i = 0; i < plane; ++i)
        ASSERT_NEAR(got[size_t(c * plane + i)], want[size_t(i)], 1e-5f * (1.0f + std::fabs(want[size_t(i)])))
            << "padding above and left only: " << H << "x" << W << " channel " << c << " at " << i;
    }
  }
  EXPECT_THROW(depthwise_channels(DepthwiseGeom{3, 3, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1}, nullptr, 9, nullptr, nullptr, 1,
                                  lanes + 1),
               Error);
  EXPECT_THROW(depthwise_channels(DepthwiseGeom{3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1}, nullptr, 9, nullptr, nullptr, 8, 2),
               Error);
}

TEST(Kernels, DepthwiseChannelsApplyTheEpilogue) {
  // Scale, shift, each activation and a residual, channel c as row ep_row + c, against
  // the plain group followed by sgemm_epilogue_block: none, ReLU and ReLU6 without a
  // residual are applied in registers, the rest over the written rows. A NaN input
  // stays NaN.
  unsigned seed = 53;
  const int64_t lanes = depthwise_channel_lanes(), ep_row = 2;
  DepthwiseGeom g{9, 9, 3, 3, 9, 9, 1, 1, 1, 1, 1, 1};
  const int64_t plane = 81;
  for (int64_t nch : {lanes - 3, lanes})  // with AVX2's 8 lanes: 5 (no 8 x 8 transpose) and 8
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kRelu6, Activation::kHardswish,
                         Activation::kGelu, Activation::kSilu})
    for (bool residual : {false, true}) {
      const int64_t C = ep_row + nch;
      auto x = randn(size_t(nch * 81), seed++), k = randn(size_t(nch * 9), seed++);
      for (auto& v : x) v *= 3.0f;
      x[10] = NAN;
      auto scale = randn(size_t(C), seed++), shift = randn(size_t(C), seed++), res = randn(size_t(C * plane), seed++);
      const GemmEpilogue ep = row_epilogue(scale, shift, act, residual ? res.data() : nullptr, plane);
      std::vector<float> got(size_t(nch * plane)), want(got.size());
      depthwise_channels(g, x.data(), 81, k.data(), got.data(), plane, nch, &ep, ep_row);
      depthwise_channels(g, x.data(), 81, k.data(), want.data(), plane, nch);
      sgemm_epilogue_block(ep, want.data(), plane, ep_row, 0, nch, plane);
      int nans = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << i;
          ++nans;
          continue;
        }
        ASSERT_EQ(got[i], want[i]) << "act " << int(act) << " residual " << residual << " at " << i;
      }
      ASSERT_GT(nans, 0);
    }
  // The sign of an exact zero (a zero group scaled by -1, shifted by -0), as
  // depthwise_plane keeps it: -0 through ReLU, ReLU6 and no activation.
  for (Activation act : {Activation::kRelu, Activation::kRelu6, Activation::kNone}) {
    const int64_t nch = lanes - 3, C = ep_row + nch;
    std::vector<float> x(size_t(nch * 81), 0.0f), k(size_t(nch * 9), 1.0f), got(size_t(nch * plane), 7.0f);
    std::vector<float> scale(size_t(C), -1.0f), shift(size_t(C), -0.0f);
    const GemmEpilogue ep = row_epilogue(scale, shift, act);
    depthwise_channels(g, x.data(), 81, k.data(), got.data(), plane, nch, &ep, ep_row);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], 0.0f);
      ASSERT_TRUE(std::signbit(got[i])) << "act " << int(act) << " at " << i;
    }
  }
}

TEST(Kernels, Conv2dDirectMatchesReference) {
  // The direct conv for few input channels against the sum over input channels of the
  // scalar per-plane correlation: 1 to 4 channels, kernels 1 to 7, strides 1 to 3
  // (the phase-split copy: 1, 2 and any), padding none / half / over the kernel's
  // reach, dilation per axis, output channels 1, 5, 8 and 13 (partial panels of 6 and
  // 8 rows), rows of fewer and more than one 16- or 32-column tile, odd image widths
  // (a stride-2 copy's last column). Nothing is written past the output.
  unsigned seed = 61;
  struct Case {
    int64_t C, H, W, K, s, p, dh, dw, OC;
  };
  for (const Case& cs : {Case{3, 9, 11, 3, 2, 1, 1, 1, 5}, Case{3, 40, 45, 7, 2, 3, 1, 1, 13}, Case{1, 6, 5, 1, 1, 0, 1, 1, 1},
                         Case{2, 20, 37, 5, 1, 2, 2, 1, 8}, Case{4, 17, 70, 3, 3, 0, 1, 2, 13},
                         Case{3, 33, 35, 3, 2, 3, 1, 1, 8}, Case{3, 7, 7, 7, 1, 7, 1, 1, 5}}) {
    const int64_t OH = (cs.H + 2 * cs.p - cs.dh * (cs.K - 1) - 1) / cs.s + 1,
                  OW = (cs.W + 2 * cs.p - cs.dw * (cs.K - 1) - 1) / cs.s + 1;
    DepthwiseGeom g{cs.H, cs.W, cs.K, cs.K, OH, OW, cs.s, cs.s, cs.p, cs.p, cs.dh, cs.dw};
    auto x = randn(size_t(cs.C * cs.H * cs.W), seed++), w = randn(size_t(cs.OC * cs.C * cs.K * cs.K), seed++);
    const size_t plane = size_t(OH * OW), n = size_t(cs.OC) * plane, guard = 40;
    std::vector<float> got(n + guard, 7.0f), want(n, 0.0f), part(plane);
    conv2d_direct(g, cs.C, cs.OC, x.data(), w.data(), got.data());
    for (int64_t oc = 0; oc < cs.OC; ++oc)
      for (int64_t c = 0; c < cs.C; ++c) {
        ref_depthwise_plane(g, x.data() + c * cs.H * cs.W, w.data() + (oc * cs.C + c) * cs.K * cs.K, part.data());
        for (size_t i = 0; i < plane; ++i) want[size_t(oc) * plane + i] += part[i];
      }
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5f * (4.0f + std::fabs(want[i])))
          << "C" << cs.C << " " << cs.H << "x" << cs.W << " k" << cs.K << " s" << cs.s << " p" << cs.p << " OC"
          << cs.OC << " at " << i;
    for (size_t i = n; i < n + guard; ++i) ASSERT_EQ(got[i], 7.0f) << "written past the output at " << i;
    // The epilogue: scale, shift, ReLU and a residual, channel oc as row oc, pixel as
    // column, against the plain conv followed by sgemm_epilogue_block.
    auto scale = randn(size_t(cs.OC), seed++), shift = randn(size_t(cs.OC), seed++), res = randn(n, seed++);
    const GemmEpilogue ep = row_epilogue(scale, shift, Activation::kRelu, res.data(), int64_t(plane));
    std::vector<float> with(n), plain(n);
    conv2d_direct(g, cs.C, cs.OC, x.data(), w.data(), with.data(), &ep);
    conv2d_direct(g, cs.C, cs.OC, x.data(), w.data(), plain.data());
    sgemm_epilogue_block(ep, plain.data(), int64_t(plane), 0, 0, cs.OC, int64_t(plane));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(with[i], plain[i]) << "epilogue at " << i;
  }
  // Padding above and left only, the windows reaching past x below and right.
  {
    DepthwiseGeom g{6, 40, 3, 3, 6, 40, 1, 1, 0, 0, 1, 1};
    auto x = randn(size_t(2 * 240), seed++), w = randn(size_t(7 * 2 * 9), seed++);
    std::vector<float> got(size_t(7 * 240)), want(got.size(), 0.0f), part(240);
    conv2d_direct(g, 2, 7, x.data(), w.data(), got.data());
    for (int64_t oc = 0; oc < 7; ++oc)
      for (int64_t c = 0; c < 2; ++c) {
        ref_depthwise_plane(g, x.data() + c * 240, w.data() + (oc * 2 + c) * 9, part.data());
        for (size_t i = 0; i < 240; ++i) want[size_t(oc) * 240 + i] += part[i];
      }
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5f * (4.0f + std::fabs(want[i]))) << "padding above only, at " << i;
  }
  EXPECT_FALSE(conv2d_direct_fits(5, 3, 3, 1));
  EXPECT_FALSE(conv2d_direct_fits(3, 3, 3, 3));
  EXPECT_THROW(conv2d_direct(DepthwiseGeom{9, 9, 3, 3, 7, 7, 1, 1, 0, 0, 1, 1}, 5, 1, nullptr, nullptr, nullptr),
               Error);
}

namespace {
// A max pooling's output size along one dim: PyTorch's rule, where ceil mode drops a last
// window that would start in the padding past the input.
int64_t max_pool_out(int64_t n, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  int64_t o = (n + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (o - 1) * s >= n + p) --o;
  return o;
}
// A max pooling node (max_pool2d or max_pool2d_nchwc): kernel kh x kw, stride s, padding
// ph x pw, dilation d.
Node max_pool_node(Op op, int64_t kh, int64_t kw, int64_t s, int64_t ph, int64_t pw, int64_t d) {
  Node n;
  n.op = op;
  n.set_ints("kernel", {SymInt(kh), SymInt(kw)});
  n.set_ints("stride", {SymInt(s), SymInt(s)});
  n.set_ints("padding", {SymInt(ph), SymInt(pw)});
  n.set_ints("dilation", {SymInt(d), SymInt(d)});
  return n;
}
}  // namespace

TEST(Kernels, MaxPool2dNchwcMatchesReferences) {
  // The blocked max pooling (max_pool2d_nchwc) against its scalar reference and, unblocked,
  // against max_pool2d's: blocks of 8 and 16 over 11 channels (the last block's channels
  // past 11 zero in and out), 2 images, odd sizes, kernels 1..3 by 1..3, strides 1 and 2,
  // padding, dilation 2, ceil mode (a last window hanging past the input), NaN taps, 1
  // and 2 threads.
  unsigned seed = 11;
  const int64_t N = 2, C = 11;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t L : {8, 16})
      for (auto [H, W] : {std::pair<int64_t, int64_t>{1, 1}, {7, 9}, {12, 5}, {16, 33}, {4, 75}})
        for (int64_t kh = 1; kh <= 3; ++kh)
          for (int64_t kw = 1; kw <= 3; ++kw)
            for (int64_t s : {1, 2})
              for (int64_t d : {1, 2})
                for (bool ceil : {false, true}) {
                  const int64_t ph = kh / 2, pw = kw / 2, CB = (C + L - 1) / L;
                  const int64_t OH = max_pool_out(H, kh, ph, s, d, ceil), OW = max_pool_out(W, kw, pw, s, d, ceil);
                  if (OH <= 0 || OW <= 0 || H + 2 * ph < d * (kh - 1) + 1 || W + 2 * pw < d * (kw - 1) + 1) continue;
                  // (what the layout pass asks of a pool it blocks: a window wholly in the
                  // padding would turn the zero channels past C into -inf)
                  const bool every_window_has_a_tap = d == 1 && ph <= kh - 1 && pw <= kw - 1;
                  auto x = randn(size_t(N * C * H * W), seed++);
                  if (seed % 3 == 0) x[size_t(seed % x.size())] = NAN;
                  std::vector<float> xb(size_t(N * CB * H * W * L));
                  nchw_to_nchwc(x.data(), N, C, H * W, L, xb.data());
                  Node n = max_pool_node(Op::max_pool2d_nchwc, kh, kw, s, ph, pw, d);
                  n.set_int("ceil_mode", ceil);
                  std::vector<float> got(size_t(N * CB * OH * OW * L), 7.0f), want(got.size(), -7.0f);
                  std::vector<TensorRef> in = {{xb.data(), DType::f32, {N, CB, H, W, L}}};
                  std::vector<TensorRef> out = {{got.data(), DType::f32, {N, CB, OH, OW, L}}};
                  run_node(n, in, out);
                  out[0].data = want.data();
                  ref_max_pool2d_nchwc(prepare_node(n, in, out).ctx(n, in, out));
                  // max_pool2d's reference on the NCHW image, then blocked for comparison
                  Node q = n;
                  q.op = Op::max_pool2d;
                  std::vector<float> plain(size_t(N * C * OH * OW)), plain_b(got.size());
                  std::vector<TensorRef> qin = {{x.data(), DType::f32, {N, C, H, W}}};
                  std::vector<TensorRef> qout = {{plain.data(), DType::f32, {N, C, OH, OW}}};
                  ref_max_pool2d(prepare_node(q, qin, qout).ctx(q, qin, qout));
                  nchw_to_nchwc(plain.data(), N, C, OH * OW, L, plain_b.data());
                  for (size_t i = 0; i < got.size(); ++i) {
                    const bool pad = int64_t(i) % L + (int64_t(i) / (L * OH * OW)) % CB * L >= C;
                    if (pad) {  // zero in, zero out wherever every window holds a tap of the image
                      ASSERT_EQ(got[i], want[i]) << "a padding channel, at " << i;
                      if (every_window_has_a_tap) ASSERT_EQ(got[i], 0.0f) << "a padding channel, at " << i;
                      continue;
                    }
                    for (float w : {want[i], plain_b[i]}) {
                      if (std::isnan(w)) {
                        ASSERT_TRUE(std::isnan(got[i])) << i;
                        continue;
                      }
                      ASSERT_EQ(got[i], w) << "L" << L << " " << H << "x" << W << " k" << kh << "x" << kw << " s" << s
                                           << " d" << d << " ceil " << ceil << " at " << i;
                    }
                  }
                }
  }
  set_num_threads(2);
}

TEST(Kernels, MaxPool2dWithIndicesMatchesReference) {
  // max_pool2d_with_indices (a training graph's pool: its windows inside the columns run
  // along each output row in vector lanes, the rest one by one) against its scalar
  // reference, values and indices equal: ties everywhere (values from {0, 1, 2}: the first
  // maximum in the window's order is kept, which decides where the backward sends the
  // gradient), NaN (the last one wins) and -inf (a window of only -inf keeps its first
  // tap), odd sizes, kernels 1..3 by 1..3, strides 1 to 3, padding, dilation 2, ceil mode,
  // 1 and 2 threads.
  unsigned seed = 23;
  const int64_t N = 2, C = 3;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [H, W] : {std::pair<int64_t, int64_t>{1, 1}, {7, 9}, {12, 5}, {16, 33}, {5, 75}})
      for (int64_t kh = 1; kh <= 3; ++kh)
        for (int64_t kw = 1; kw <= 3; ++kw)
          for (int64_t s : {1, 2, 3})
            for (int64_t d : {1, 2})
              for (bool ceil : {false, true}) {
                const int64_t ph = kh / 2, pw = kw / 2;
                const int64_t OH = max_pool_out(H, kh, ph, s, d, ceil), OW = max_pool_out(W, kw, pw, s, d, ceil);
                if (OH <= 0 || OW <= 0 || H + 2 * ph < d * (kh - 1) + 1 || W + 2 * pw < d * (kw - 1) + 1) continue;
                std::vector<float> x(size_t(N * C * H * W));
                std::mt19937 rng(seed++);
                for (float& v : x) v = float(rng() % 3);
                x[size_t(rng() % x.size())] = NAN;
                x[size_t(rng() % x.size())] = NAN;
                std::fill_n(x.begin() + int64_t(rng() % x.size() / 2), std::min<int64_t>(H * W, 12), -INFINITY);
                Node n = max_pool_node(Op::max_pool2d_with_indices, kh, kw, s, ph, pw, d);
                n.set_int("ceil_mode", ceil);
                const size_t no = size_t(N * C * OH * OW);
                std::vector<float> got(no + 8, 7.0f), want(no);
                std::vector<int64_t> gi(no + 8, -7), wi(no);
                std::vector<TensorRef> in = {{x.data(), DType::f32, {N, C, H, W}}};
                std::vector<TensorRef> out = {{got.data(), DType::f32, {N, C, OH, OW}},
                                              {gi.data(), DType::i64, {N, C, OH, OW}}};
                run_node(n, in, out);
                std::vector<TensorRef> rout = {{want.data(), DType::f32, {N, C, OH, OW}},
                                               {wi.data(), DType::i64, {N, C, OH, OW}}};
                ref_max_pool2d_with_indices(prepare_node(n, in, rout).ctx(n, in, rout));
                for (size_t i = 0; i < no; ++i) {
                  ASSERT_EQ(gi[i], wi[i]) << H << "x" << W << " k" << kh << "x" << kw << " s" << s << " d" << d
                                          << " ceil " << ceil << " index at " << i;
                  if (std::isnan(want[i])) ASSERT_TRUE(std::isnan(got[i])) << i;
                  else ASSERT_EQ(got[i], want[i]) << i;
                }
                for (size_t i = no; i < no + 8; ++i) {
                  ASSERT_EQ(got[i], 7.0f) << "written past the output";
                  ASSERT_EQ(gi[i], -7) << "written past the indices";
                }
              }
  }
  set_num_threads(2);
}

// max_pool2d over int8 codes (chain_int8's, after a ReLU): against its scalar reference,
// and against max_pool2d on the values the codes stand for (code x scale, NaN for the mark
// -128), quantized back: channel counts below, at and past a 32-code vector and with a
// tail, codes 0..127 with marks, kernels 1..3, strides 1 and 2, padding, dilation 2,
// ceil mode, 1 and 2 threads.
TEST(Kernels, MaxPool2dCodesMatchesReferenceAndTheFloatPool) {
  unsigned seed = 17;
  const float scale = 0.07f;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t C : {3, 32, 37, 64, 70})
      for (auto [H, W] : {std::pair<int64_t, int64_t>{1, 1}, {7, 9}, {12, 5}, {16, 13}})
        for (int64_t k = 1; k <= 3; ++k)
          for (int64_t s : {1, 2})
            for (int64_t d : {1, 2})
              for (bool ceil : {false, true}) {
                const int64_t N = 2, pd = k / 2;
                const int64_t OH = max_pool_out(H, k, pd, s, d, ceil), OW = max_pool_out(W, k, pd, s, d, ceil);
                if (OH <= 0 || OW <= 0 || H + 2 * pd < d * (k - 1) + 1 || W + 2 * pd < d * (k - 1) + 1) continue;
                std::vector<int8_t> x(size_t(N * H * W * C));
                std::mt19937 rng(seed++);
                for (int8_t& v : x) v = int8_t(rng() % 128);
                for (int j = 0; j < 3; ++j) x[rng() % x.size()] = -128;  // marks
                x[size_t(C - 1)] = -128;  // pixel 0's last channel (a vector lane from 32 on), beside larger codes
                for (int64_t c = 0; c < C - 1; ++c) x[size_t(c)] = 127;
                Node n = max_pool_node(Op::max_pool2d_codes, k, k, s, pd, pd, d);
                n.set_int("ceil_mode", ceil);
                std::vector<int8_t> got(size_t(N * OH * OW * C), 7), want(got.size(), -7);
                std::vector<TensorRef> in = {{x.data(), DType::u8, {N, H, W, C}}};
                std::vector<TensorRef> out = {{got.data(), DType::u8, {N, OH, OW, C}}};
                run_node(n, in, out);
                out[0].data = want.data();
                ref_max_pool2d_codes(prepare_node(n, in, out).ctx(n, in, out));
                // the float pool on the values, NCHW
                std::vector<float> xf(size_t(N * C * H * W)), pooled(size_t(N * C * OH * OW));
                for (int64_t b = 0; b < N; ++b)
                  for (int64_t p = 0; p < H * W; ++p)
                    for (int64_t c = 0; c < C; ++c) {
                      const int8_t q = x[size_t((b * H * W + p) * C + c)];
                      xf[size_t((b * C + c) * H * W + p)] = q == -128 ? NAN : float(q) * scale;
                    }
                Node q = n;
                q.op = Op::max_pool2d;
                std::vector<TensorRef> qin = {{xf.data(), DType::f32, {N, C, H, W}}};
                std::vector<TensorRef> qout = {{pooled.data(), DType::f32, {N, C, OH, OW}}};
                ref_max_pool2d(prepare_node(q, qin, qout).ctx(q, qin, qout));
                const std::string what = "C" + std::to_string(C) + " " + std::to_string(H) + "x" + std::to_string(W) +
                                         " k" + std::to_string(k) + " s" + std::to_string(s) + " d" +
                                         std::to_string(d) + " ceil " + std::to_string(ceil);
                for (int64_t b = 0; b < N; ++b)
                  for (int64_t p = 0; p < OH * OW; ++p)
                    for (int64_t c = 0; c < C; ++c) {
                      const size_t i = size_t((b * OH * OW + p) * C + c);
                      ASSERT_EQ(int(got[i]), int(want[i])) << what << " at " << i;
                      const float v = pooled[size_t((b * C + c) * OH * OW + p)];
                      const int code = std::isfinite(v) ? int(std::nearbyint(v / scale)) : -128;
                      ASSERT_EQ(int(got[i]), code) << what << ": the float pool's code, at " << i;
                    }
                if (pd == 0) ASSERT_EQ(int(got[size_t(C - 1)]), -128) << what << ": the mark at pixel 0";
              }
  }
  set_num_threads(2);
}

TEST(Kernels, MaxPool2dMatchesReference) {
  // Row maxima first, then windows along them, against each window's taps in turn: odd
  // sizes (rows of 75 and 112: the vectorized 3-wide stride-2 windows and their tail), kernels 1..4 by 1..3, strides 1..3, padding, dilation 2, ceil mode (a last
  // window hanging past the input), NaN taps (they win, as in PyTorch), 1 and 2 threads.
  unsigned seed = 5;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (auto [H, W] : {std::pair<int64_t, int64_t>{1, 1}, {7, 9}, {12, 5}, {16, 33}, {5, 112}, {4, 75}})
      for (int64_t kh = 1; kh <= 4; ++kh)
        for (int64_t kw = 1; kw <= 3; ++kw)
          for (int64_t s = 1; s <= 3; ++s)
            for (int64_t d : {1, 2})
              for (bool ceil : {false, true}) {
                int64_t ph = kh / 2, pw = kw / 2;
                int64_t OH = max_pool_out(H, kh, ph, s, d, ceil), OW = max_pool_out(W, kw, pw, s, d, ceil);
                if (OH <= 0 || OW <= 0 || H + 2 * ph < d * (kh - 1) + 1 || W + 2 * pw < d * (kw - 1) + 1) continue;
                auto x = randn(size_t(3 * H * W), seed++);
                if (seed % 3 == 0) x[size_t(seed % x.size())] = NAN;
                Node n = max_pool_node(Op::max_pool2d, kh, kw, s, ph, pw, d);
                std::vector<float> got(size_t(3 * OH * OW), 7.0f), want(got.size(), -7.0f);
                std::vector<TensorRef> in = {{x.data(), DType::f32, {1, 3, H, W}}};
                std::vector<TensorRef> out = {{got.data(), DType::f32, {1, 3, OH, OW}}};
                run_node(n, in, out);
                out[0].data = want.data();
                ref_max_pool2d(prepare_node(n, in, out).ctx(n, in, out));
                for (size_t i = 0; i < got.size(); ++i) {
                  if (std::isnan(want[i])) {
                    ASSERT_TRUE(std::isnan(got[i])) << i;
                    continue;
                  }
                  ASSERT_EQ(got[i], want[i]) << H << "x" << W << " k" << kh << "x" << kw << " s" << s << " d" << d
                                             << " ceil " << ceil << " at " << i;
                }
              }
  }
  set_num_threads(2);
}

// Integer division by -1 of the lowest value overflows, and x86's idiv traps on it
// (SIGFPE would end the caller's process): floor and trunc division give the lowest
// value back (two's complement wrapping, PyTorch's floor division's answer; its trunc
// division traps) and remainder 0; division by zero is a clear error. i64 and i32.
TEST(Kernels, IntegerDivisionByMinusOneAndZero) {
  const auto check = [](auto lowest, const char* dt) {
    using T = decltype(lowest);
    const std::string ty = std::string(dt) + "[6]";
    const T top = std::numeric_limits<T>::max(), half = T(T(1) << (sizeof(T) * 8 - 2));  // 2^62 or 2^30
    // (the last pair: the highest mod -2, where a - floordiv(a, b) * b overflows)
    std::vector<T> a = {lowest, 7, -7, 5, T(lowest + 1), top}, b = {-1, -1, 2, -2, -1, -2};
    const std::vector<T> floor = {lowest, -7, -4, -3, T(-(lowest + 1)), T(-half)},
                         trunc = {lowest, -7, -3, -2, T(-(lowest + 1)), T(-(half - 1))}, rem = {0, 0, 1, -1, 0, -1};
    const DType d = sizeof(T) == 8 ? DType::i64 : DType::i32;
    for (const char* op : {"div_floor", "div_trunc", "remainder"}) {
      const std::string node = std::string(op) == "remainder" ? "remainder(%a, %b)"
                               : std::string(op) == "div_floor" ? "div(%a, %b) {rounding=floor}"
                                                                : "div(%a, %b) {rounding=trunc}";
      Executable exe(parse_graph("graph(%a: " + ty + ", %b: " + ty + ") {\n  %c: " + ty + " = " + node +
                                 "\n  return (%c)\n})"));
      auto out = exe.run({{a.data(), d, {6}}, {b.data(), d, {6}}}, {});
      const T* got = static_cast<const T*>(out[0].data);
      const std::vector<T>& want = std::string(op) == "remainder" ? rem : std::string(op) == "div_floor" ? floor : trunc;
      for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], want[size_t(i)]) << op << " " << dt << " at " << i;
      std::vector<T> z = b;
      z[2] = 0;
      EXPECT_THROW(exe.run({{a.data(), d, {6}}, {z.data(), d, {6}}}, {}), Error) << op << " " << dt;
    }
  };
  check(std::numeric_limits<int64_t>::lowest(), "i64");
  check(std::numeric_limits<int32_t>::lowest(), "i32");
}

TEST(Kernels, ConvBackwardMatchesScalarReference) {
  // conv2d_input_grad (GEMM per chunk of images + col2im; depthwise directly) and
  // conv2d_weight_grad (B built from the padded input, channels last for groups of 16+
  // channels, else phase-split: one GEMM over the batch, or one per image on maps of
  // 512+ output pixels, the images split across threads where they share out evenly;
  // depthwise directly) against
  // their double-summing scalar references: one and several groups, depthwise, strides
  // 1 to 3, padding, dilation (with strides: taps in every column phase), odd sizes, an
  // input wider than the windows reach (output_padding: the rows no window reads get
  // only the bias), small maps (several images per input-gradient GEMM), maps of 512+
  // pixels (one image per GEMM, the gradient read in place, grouped and strided too)
  // and pointwise convs; depthwise convs on small maps (16 channels in the lanes: 20
  // channels make a part group) and on rows of 20+ columns (plane by plane, row by row).
  // Two threads: planes and rows split across them.
  struct Case {
    int64_t N, C, OC, H, W, K, s, p, d, G;
  };
  const Case cases[] = {
      {2, 5, 7, 9, 11, 3, 1, 1, 1, 1},   {3, 6, 4, 13, 10, 3, 2, 1, 1, 1}, {2, 4, 6, 9, 9, 3, 3, 0, 1, 2},
      {2, 8, 8, 11, 12, 3, 2, 1, 1, 8}, {3, 6, 6, 7, 7, 5, 1, 2, 2, 6},   {2, 7, 9, 6, 5, 1, 1, 0, 1, 1},
      {5, 16, 12, 4, 3, 3, 1, 1, 1, 1},  {2, 6, 3, 10, 9, 1, 2, 0, 1, 3},  {2, 4, 4, 12, 12, 2, 2, 0, 1, 4},
      {1, 3, 5, 8, 6, 4, 2, 1, 1, 1},   {1, 7, 9, 6, 5, 1, 1, 0, 1, 1},  {2, 3, 4, 24, 24, 3, 1, 1, 1, 1},
      {2, 4, 6, 23, 25, 1, 1, 0, 1, 2},  {2, 3, 5, 6, 37, 3, 1, 1, 1, 1},  {2, 4, 3, 9, 70, 3, 2, 1, 1, 1},
      {2, 4, 6, 11, 13, 3, 2, 1, 2, 1},  {2, 3, 3, 14, 16, 3, 3, 2, 2, 1}, {2, 4, 6, 48, 50, 3, 2, 1, 1, 2},
      {2, 5, 5, 13, 11, 3, 3, 2, 2, 5},  // (depthwise, stride and dilation: taps in every phase)
      {2, 20, 20, 9, 8, 3, 2, 1, 1, 20}, {2, 3, 3, 5, 47, 3, 1, 1, 1, 3}, {2, 3, 3, 6, 44, 3, 2, 1, 1, 3},
      // groups of 16+ channels (B from the channels-last input): 19 channels (a panel's
      // row in runs of two taps), stride 2; two groups of 16 with dilation; 32 and 40
      // channels (whole panel rows of AVX-512's 32 columns, and 40 = 32 + 8); maps of 512+
      // pixels: images split across threads (4 images: two a thread, the second added
      // in; 2 images: one each), or one at a time with each GEMM split (3 images on 2
      // threads share out unevenly), 3x3 and 1x1, stride 2, one group and two
      {2, 19, 8, 6, 7, 3, 2, 1, 1, 1},   {2, 32, 6, 7, 6, 3, 1, 2, 2, 2},    {2, 32, 5, 5, 6, 3, 1, 1, 1, 1},
      {2, 40, 7, 6, 5, 3, 2, 1, 1, 1},   {4, 17, 5, 24, 24, 3, 1, 1, 1, 1},  {3, 17, 5, 24, 24, 3, 1, 1, 1, 1},
      {3, 16, 4, 23, 25, 1, 1, 0, 1, 1}, {2, 32, 4, 23, 23, 3, 1, 1, 1, 2},  {4, 16, 4, 48, 48, 3, 2, 1, 1, 1},
      {4, 5, 4, 24, 22, 3, 1, 1, 1, 1},  {3, 5, 4, 24, 22, 3, 1, 1, 1, 1}};
  unsigned seed = 900;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& t : cases)
      for (int64_t extra : {0, 1}) {  // extra: input rows and columns past the last window
        const int64_t OH = (t.H + 2 * t.p - t.d * (t.K - 1) - 1) / t.s + 1,
                      OW = (t.W + 2 * t.p - t.d * (t.K - 1) - 1) / t.s + 1;
        const int64_t H = t.H + (t.s > 1 ? extra : 0), W = t.W + (t.s > 1 ? extra : 0);
        const ConvGradGeom g{t.N, t.C, H, W, t.OC, OH, OW, t.K, t.K, t.s, t.s, t.p, t.p, t.d, t.d, t.G};
        const size_t nx = size_t(t.N * t.C * H * W), ny = size_t(t.N * t.OC * OH * OW),
                     nw = size_t(t.OC * (t.C / t.G) * t.K * t.K);
        auto x = randn(nx, seed++), gy = randn(ny, seed++), w = randn(nw, seed++), bias = randn(size_t(t.C), seed++);
        const size_t guard = 24;
        std::vector<float> dx(nx + guard, 7.0f), dx_ref(nx), dw(nw + guard, 7.0f), dw_ref(nw);
        for (bool with_bias : {false, true}) {
          conv2d_input_grad(g, gy.data(), w.data(), with_bias ? bias.data() : nullptr, dx.data());
          ref_conv2d_input_grad(g, gy.data(), w.data(), with_bias ? bias.data() : nullptr, dx_ref.data());
          for (size_t i = 0; i < nx; ++i)
            ASSERT_NEAR(dx[i], dx_ref[i], 1e-4f * (1.0f + std::fabs(dx_ref[i])))
                << "input grad N" << t.N << " C" << t.C << " OC" << t.OC << " " << H << "x" << W << " k" << t.K
                << " s" << t.s << " p" << t.p << " d" << t.d << " G" << t.G << " bias " << with_bias << " at " << i;
        }
        conv2d_weight_grad(g, gy.data(), x.data(), dw.data());
        ref_conv2d_weight_grad(g, gy.data(), x.data(), dw_ref.data());
        for (size_t i = 0; i < nw; ++i)
          ASSERT_NEAR(dw[i], dw_ref[i], 1e-4f * (1.0f + std::fabs(dw_ref[i])))
              << "weight grad N" << t.N << " C" << t.C << " OC" << t.OC << " " << H << "x" << W << " k" << t.K
              << " s" << t.s << " p" << t.p << " d" << t.d << " G" << t.G << " at " << i;
        for (size_t i = 0; i < guard; ++i) {
          ASSERT_EQ(dx[nx + i], 7.0f) << "input grad written past its end";
          ASSERT_EQ(dw[nw + i], 7.0f) << "weight grad written past its end";
        }
      }
  }
  set_num_threads(1);
}
