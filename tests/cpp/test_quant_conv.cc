// conv2d with int8 filters and int8 activations (kernels/conv2d_int8.cc): against an
// independent scalar reference written here (codes, integer sums, scales) over odd
// channel counts, kernel sizes, strides, padding, dilation and batches, static and
// dynamic scales, every ISA this CPU runs, one and two threads; NaN and infinity in the
// input; the blocked layout (NCHWc) against NCHW; the op in the IR (inference, packing,
// fused epilogues, the layout pass).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "zenith/error.h"
#include "zenith/ir.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/passes/passes.h"
#include "zenith/runtime.h"
#include "zenith/threadpool.h"
#include "test_util.h"

using namespace zenith;

namespace {

struct Case {
  int64_t N, C, H, W, OC, KH, KW, sh, sw, ph, pw, dh, dw;
};

Conv2dInt8Geom geom(const Case& c) {
  Conv2dInt8Geom g;
  g.N = c.N, g.C = c.C, g.H = c.H, g.W = c.W, g.OC = c.OC, g.KH = c.KH, g.KW = c.KW;
  g.st = {c.sh, c.sw}, g.pd = {c.ph, c.pw}, g.dl = {c.dh, c.dw};
  g.OH = (c.H + 2 * c.ph - c.dh * (c.KH - 1) - 1) / c.sh + 1;
  g.OW = (c.W + 2 * c.pw - c.dw * (c.KW - 1) - 1) / c.sw + 1;
  return g;
}

// int8 rows [OC, 4 + C * KH * KW]: a scale in [1e-3, 5e-2], then codes in [-127, 127]
// (every 7th at an extreme: the integer sums' worst cases).
std::vector<uint8_t> random_filters(int64_t OC, int64_t K, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(1e-3f, 5e-2f);
  std::vector<uint8_t> w(size_t(OC * (4 + K)));
  for (int64_t oc = 0; oc < OC; ++oc) {
    const float s = mag(rng);
    std::memcpy(&w[size_t(oc * (4 + K))], &s, 4);
    for (int64_t k = 0; k < K; ++k)
      w[size_t(oc * (4 + K) + 4 + k)] = uint8_t(int8_t(k % 7 == 0 ? (rng() & 1 ? 127 : -127) : int(rng() % 255) - 127));
  }
  return w;
}

// The reference: each image's codes round(x / s) in [-127, 127] (s given, or max|finite
// x| / 127), exact integer window sums in int64, times s and the filter's scale, plus the
// bias; NaN for a window touching a NaN or infinity. `mag`, when given, receives each
// output's |sum| + |bias|: the size its rounding errors scale with (a bias cancelling a
// sum of 90 leaves 0.03 whose error is the sum's).
std::vector<float> reference(const Conv2dInt8Geom& g, const std::vector<float>& x, const std::vector<uint8_t>& w,
                             std::optional<float> x_scale, const float* bias, std::vector<float>* mag = nullptr) {
  const int64_t K = g.K(), HW = g.H * g.W;
  std::vector<float> y(size_t(g.N * g.OC * g.OH * g.OW));
  if (mag) mag->assign(y.size(), 0.0f);
  for (int64_t n = 0; n < g.N; ++n) {
    const float* xn = x.data() + n * g.C * HW;
    float s = 1.0f;
    if (x_scale) {
      s = *x_scale;
    } else {
      float amax = 0.0f;
      for (int64_t i = 0; i < g.C * HW; ++i)
        if (std::isfinite(xn[i])) amax = std::max(amax, std::fabs(xn[i]));
      if (amax > 0) s = amax / 127.0f;
    }
    const float inv = 1.0f / s;
    std::vector<int> code(size_t(g.C * HW));
    std::vector<bool> bad(size_t(g.C * HW));
    for (int64_t i = 0; i < g.C * HW; ++i) {
      bad[size_t(i)] = !std::isfinite(xn[i]);
      const float r = std::nearbyint(xn[i] * inv);
      code[size_t(i)] = bad[size_t(i)] ? 0 : int(std::min(127.0f, std::max(-127.0f, r)));
    }
    for (int64_t oc = 0; oc < g.OC; ++oc) {
      const uint8_t* row = w.data() + oc * (4 + K);
      float ws;
      std::memcpy(&ws, row, 4);
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          int64_t acc = 0;
          bool nan = false;
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0], iw = ow * g.st[1] - g.pd[1] + kw * g.dl[1];
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                const size_t i = size_t(c * HW + ih * g.W + iw);
                nan = nan || bad[i];
                acc += int64_t(code[i]) * int8_t(row[4 + (c * g.KH + kh) * g.KW + kw]);
              }
          const float sum = float(double(acc) * s * ws), v = sum + (bias ? bias[oc] : 0.0f);
          const size_t at = size_t(((n * g.OC + oc) * g.OH + oh) * g.OW + ow);
          y[at] = nan ? std::numeric_limits<float>::quiet_NaN() : v;
          if (mag) (*mag)[at] = std::fabs(sum) + (bias ? std::fabs(bias[oc]) : 0.0f);
        }
    }
  }
  return y;
}

std::vector<QIsa> isas() {
  std::vector<QIsa> r{QIsa::kScalar};
  for (QIsa i : {QIsa::kAvx2, QIsa::kAvxVnni, QIsa::kAvx512})
    if (qisa_supported(i)) r.push_back(i);
  return r;
}

// Within 2e-5 of the larger of |want| and mag (reference's), plus 2e-5.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                  const std::vector<float>* mag = nullptr) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " at " << i << ": " << got[i] << " (want NaN)";
      continue;
    }
    const float size = std::max(std::fabs(want[i]), mag ? (*mag)[i] : 0.0f);
    ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + size)) << what << " at " << i;
  }
}

const Case kCases[] = {
    {1, 3, 17, 19, 37, 7, 7, 2, 2, 3, 3, 1, 1},   // a stem: 3 channels, 7x7 / 2
    {2, 5, 9, 11, 33, 3, 3, 1, 1, 1, 1, 1, 1},    // few channels, pixels off 8
    {1, 17, 10, 10, 70, 3, 5, 2, 1, 1, 2, 2, 1},  // 8-channel groups and a remainder; dilation, odd padding
    {3, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0, 1, 1},    // 1x1 over whole 32s: rows read in place
    {1, 40, 6, 13, 1, 1, 1, 1, 1, 0, 0, 1, 1},    // 1x1, K not a whole 32: rows copied; one output channel
    {2, 16, 12, 12, 48, 1, 1, 2, 2, 0, 0, 1, 1},  // 1x1 stride 2
    {1, 24, 5, 9, 20, 3, 3, 1, 1, 2, 0, 1, 3},    // padding past the kernel's reach in rows, dilation in columns
    {1, 32, 4, 4, 64, 5, 5, 1, 1, 0, 0, 1, 1},    // one output pixel
    {2, 64, 13, 11, 40, 1, 1, 2, 3, 0, 0, 1, 1},  // 1x1 over whole 32s with strides: only the pixels read quantized
    {2, 512, 12, 11, 8, 1, 1, 1, 1, 0, 0, 1, 1},  // many channels: tiles of 128 pixels, 132 per image
    {2, 512, 24, 23, 16, 1, 1, 2, 2, 0, 0, 1, 1}, // strided 1x1, 144 pixels read per image (2 tiles); 288 rows:
                                                  // threads take shares of rows at 2 threads
    {1, 256, 12, 12, 2100, 1, 1, 1, 1, 0, 0, 1, 1},  // a filter over 512 KiB: chunks of 64 rows one at a time
    {2, 8, 26, 26, 384, 1, 1, 1, 1, 0, 0, 1, 1},  // at 2 threads, shares of 676 rows in 2 pieces of 338, rounded up
                                                  // to whole tiles (344 of 8, 348 of 12) past the 341-row chunk
                                                  // the buffers had held (MobileNet V2 at batch 8 corrupted the heap)
    {1, 16, 5, 7, 100, 1, 1, 1, 1, 0, 0, 1, 1},  // 100 channels: the codes' 32-byte stores from a start past a
                                                 // multiple of 32 (the scalar reference's split at 2 threads, 50)
    // Tap rows of at most 32 codes, copied 32 bytes at a time (short_runs):
    {2, 4, 9, 10, 12, 3, 5, 1, 2, 2, 2, 2, 1},   // row dilation, column stride, runs cut by the padding
    {1, 1, 8, 40, 8, 1, 31, 1, 1, 0, 15, 1, 1},  // a run of 31 codes in a row of 32: the last copies exact
    {1, 3, 1, 1, 4, 3, 3, 1, 1, 1, 1, 1, 1},     // a one-pixel image in padding: its one run copied exactly
    {1, 3, 1, 1, 4, 1, 1, 1, 1, 0, 0, 1, 1},     // a one-pixel image, 1x1: the copy reads 29 bytes past its codes
    // Channels in whole 32s, dilation 1: AVX-512's direct rows (windows read in place from a padded copy)
    {2, 64, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1},   // 3x3 / 1, padding 1, batch 2
    {1, 32, 10, 9, 70, 3, 3, 2, 2, 1, 1, 1, 1},   // 3x3 / 2 with padding
    {2, 96, 6, 7, 16, 3, 1, 1, 1, 2, 0, 1, 1},    // 3x1 with padding past the kernel's reach in rows
    {2, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1},  // 392 rows: threads take shares of rows
    {1, 64, 8, 8, 32, 3, 3, 1, 1, 1, 1, 2, 2},    // dilation 2: window rows still
    {2, 64, 7, 7, 40, 1, 1, 2, 2, 1, 1, 1, 1},    // a padded strided 1x1: one run a row
    {1, 32, 9, 10, 24, 3, 3, 2, 2, 1, 1, 1, 1},   // a stride that leaves the last input column unread
};

// Calls f(threads, c, L) at one and two threads, for every case, over blocks of 8 and 16
// (the blocked layout's sweep); one thread again after.
template <class F>
void for_each_blocked_case(F&& f) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : kCases)
      for (int64_t L : {8, 16}) f(threads, c, L);
  }
  set_num_threads(1);
}

}  // namespace

TEST(QuantConv, MatchesScalarReference) {
  unsigned seed = 1;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : kCases)
    for (bool relu : {false, true}) {  // an input with no negative value: AVX2's tiles without the sign trick
      const Conv2dInt8Geom g = geom(c);
      auto x = randn(size_t(g.N * g.C * g.H * g.W), seed++, 2.0f);
      if (relu)
        for (float& v : x) v = std::max(v, 0.0f);
      auto w = random_filters(g.OC, g.K(), seed++);
      auto bias = randn(size_t(g.OC), seed++);
      GemmEpilogue ep;
      ep.row_shift = bias.data();
      for (std::optional<float> s : {std::optional<float>(), std::optional<float>(0.02f)}) {
        std::vector<float> mag;
        const auto want = reference(g, x, w, s, bias.data(), &mag);
        for (QIsa isa : isas()) {
          const PackedOperand p = conv2d_int8_pack(g, w.data(), isa);
          std::vector<float> y(want.size(), -7.0f);
          conv2d_int8(g, isa, x.data(), p, s, ep, nullptr, y.data());
          expect_close(y, want,
                       std::string(qisa_name(isa)) + " C=" + std::to_string(c.C) + " OC=" + std::to_string(c.OC) +
                           " k=" + std::to_string(c.KH) + "x" + std::to_string(c.KW) + (s ? " static" : " dynamic") +
                           (relu ? " relu" : "") + " threads=" + std::to_string(threads),
                       &mag);
        }
      }
    }
  }
  set_num_threads(1);
}

// A NaN or infinity makes exactly the outputs whose windows read it NaN (in every
// channel); the image's other outputs keep the finite values (the dynamic scale ignores
// the non-finite input).
TEST(QuantConv, NonFiniteInputsGiveNaNWhereTheyAreRead) {
  const Case c{2, 9, 8, 8, 5, 3, 3, 1, 1, 1, 1, 1, 1};
  const Conv2dInt8Geom g = geom(c);
  auto x = randn(size_t(g.N * g.C * g.H * g.W), 7);
  x[size_t(4 * 64 + 2 * 8 + 3)] = std::numeric_limits<float>::quiet_NaN();   // image 0, channel 4, (2, 3)
  x[size_t(9 * 64 + 8 * 64 - 1)] = std::numeric_limits<float>::infinity();   // image 1, channel 8, (7, 7)
  auto w = random_filters(g.OC, g.K(), 8);
  for (std::optional<float> s : {std::optional<float>(), std::optional<float>(0.03f)}) {
    const auto want = reference(g, x, w, s, nullptr);
    int nans = 0;
    for (float v : want) nans += std::isnan(v);
    ASSERT_EQ(nans, g.OC * (9 + 4));  // a 3x3 window around each, the corner one clipped
    for (QIsa isa : isas()) {
      const PackedOperand p = conv2d_int8_pack(g, w.data(), isa);
      std::vector<float> y(want.size());
      conv2d_int8(g, isa, x.data(), p, s, GemmEpilogue{}, nullptr, y.data());
      expect_close(y, want, std::string(qisa_name(isa)) + (s ? " static" : " dynamic"));
    }
  }
}

// A NaN in one image of two: the other image's outputs stay finite (a conv whose window
// rows are summed as built looks up the NaN flags only in images holding one), a stem's
// 7x7 windows over 3 channels.
TEST(QuantConv, NonFiniteInOneImageLeavesTheOther) {
  const Case c{2, 3, 12, 12, 8, 7, 7, 2, 2, 3, 3, 1, 1};
  const Conv2dInt8Geom g = geom(c);
  auto x = randn(size_t(g.N * g.C * g.H * g.W), 17);
  x[size_t(3 * 144 + 2 * 144 + 5 * 12 + 6)] = std::numeric_limits<float>::quiet_NaN();  // image 1, channel 2, (5, 6)
  auto w = random_filters(g.OC, g.K(), 18);
  for (std::optional<float> s : {std::optional<float>(), std::optional<float>(0.03f)}) {
    const auto want = reference(g, x, w, s, nullptr);
    int nans = 0, nans0 = 0;
    for (size_t i = 0; i < want.size(); ++i) nans += std::isnan(want[i]), nans0 += i < want.size() / 2 && std::isnan(want[i]);
    ASSERT_EQ(nans0, 0);
    ASSERT_GT(nans, 0);
    for (QIsa isa : isas()) {
      const PackedOperand p = conv2d_int8_pack(g, w.data(), isa);
      std::vector<float> y(want.size());
      conv2d_int8(g, isa, x.data(), p, s, GemmEpilogue{}, nullptr, y.data());
      expect_close(y, want, std::string(qisa_name(isa)) + (s ? " static" : " dynamic"));
    }
  }
}

// A strided 1x1 conv quantizes only the pixels it reads: a NaN it skips changes nothing,
// one it reads makes that output pixel NaN in every channel.
TEST(QuantConv, StridedPointwiseReadsOnlyItsPixels) {
  const Case c{1, 32, 6, 7, 9, 1, 1, 2, 2, 0, 0, 1, 1};
  const Conv2dInt8Geom g = geom(c);
  auto x = randn(size_t(g.N * g.C * g.H * g.W), 11);
  x[size_t(3 * 42 + 1 * 7 + 1)] = std::numeric_limits<float>::quiet_NaN();  // channel 3, (1, 1): skipped
  x[size_t(5 * 42 + 2 * 7 + 4)] = std::numeric_limits<float>::infinity();   // channel 5, (2, 4): output (1, 2)
  auto w = random_filters(g.OC, g.K(), 12);
  const auto want = reference(g, x, w, 0.03f, nullptr);
  int nans = 0;
  for (float v : want) nans += std::isnan(v);
  ASSERT_EQ(nans, g.OC);
  for (QIsa isa : isas()) {
    const PackedOperand p = conv2d_int8_pack(g, w.data(), isa);
    std::vector<float> y(want.size());
    conv2d_int8(g, isa, x.data(), p, 0.03f, GemmEpilogue{}, nullptr, y.data());
    expect_close(y, want, qisa_name(isa));
    EXPECT_TRUE(std::isnan(y[size_t(1 * g.OW + 2)]));
  }
}

// Inputs beyond 127 steps of a static scale clip to +-127, as the reference does; an
// image of zeros (dynamic: no scale to take) gives the bias.
TEST(QuantConv, ClippingAndZeroImages) {
  const Case c{2, 8, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1};
  const Conv2dInt8Geom g = geom(c);
  auto x = randn(size_t(g.N * g.C * g.H * g.W), 9, 10.0f);
  std::fill(x.begin() + g.C * g.H * g.W, x.end(), 0.0f);  // image 1: zeros
  auto w = random_filters(g.OC, g.K(), 10);
  auto bias = randn(size_t(g.OC), 11);
  GemmEpilogue ep;
  ep.row_shift = bias.data();
  for (std::optional<float> s : {std::optional<float>(), std::optional<float>(0.01f)}) {
    std::vector<float> mag;
    const auto want = reference(g, x, w, s, bias.data(), &mag);
    for (QIsa isa : isas()) {
      const PackedOperand p = conv2d_int8_pack(g, w.data(), isa);
      std::vector<float> y(want.size());
      conv2d_int8(g, isa, x.data(), p, s, ep, nullptr, y.data());
      expect_close(y, want, qisa_name(isa), &mag);
      for (int64_t i = g.OC * g.OH * g.OW; i < int64_t(y.size()); ++i)
        ASSERT_EQ(y[size_t(i)], bias[size_t((i / (g.OH * g.OW)) % g.OC)]);
    }
  }
}

// Over the blocked layout (channel blocks of 8 and 16) the conv gives NCHW's values,
// blocked: every case above, with each epilogue (scale, shift, residual, activations in
// registers and not), static and dynamic, every ISA, one and two threads. The input's
// padding channels hold NaN (the contract says 0; NaN shows any read of them), y starts
// as garbage, and the output's padding channels must come out 0.
TEST(QuantConv, BlockedLayoutMatchesNchw) {
  unsigned seed = 100;
  const Activation acts[] = {Activation::kNone,      Activation::kRelu,        Activation::kRelu6,
                             Activation::kHardswish, Activation::kHardsigmoid, Activation::kGelu};
  int variant = 0;
  for_each_blocked_case([&](int threads, const Case& c, int64_t L) {
    Conv2dInt8Geom g = geom(c);
    const int64_t HW = g.H * g.W, OP = g.OH * g.OW, CB = (g.C + L - 1) / L, OCB = (g.OC + L - 1) / L;
    auto x = randn(size_t(g.N * g.C * HW), seed++, 2.0f);
    if (c.C == 17) x[size_t(HW + 5)] = std::numeric_limits<float>::quiet_NaN();  // channel 1, pixel 5
    auto w = random_filters(g.OC, g.K(), seed++);
    auto scale = randn(size_t(g.OC), seed++), shift = randn(size_t(g.OC), seed++);
    auto res = randn(size_t(g.N * g.OC * OP), seed++);
    const int v = variant++;
    GemmEpilogue ep;
    ep.row_scale = v % 2 ? scale.data() : nullptr;
    ep.row_shift = v % 3 ? shift.data() : nullptr;
    ep.act = acts[v % 6];
    const bool with_res = v % 4 < 2;
    // x and the residual blocked, their padding channels NaN
    std::vector<float> xb(size_t(g.N * CB * L * HW)), rb(size_t(g.N * OCB * L * OP));
    nchw_to_nchwc(x.data(), g.N, g.C, HW, L, xb.data());
    nchw_to_nchwc(res.data(), g.N, g.OC, OP, L, rb.data());
    auto poison = [&](std::vector<float>& t, int64_t C, int64_t P) {
      for (int64_t i = 0; i < int64_t(t.size()); ++i)
        if ((i / (P * L)) % ((C + L - 1) / L) * L + i % L >= C) t[size_t(i)] = std::numeric_limits<float>::quiet_NaN();
    };
    poison(xb, g.C, HW);
    std::vector<float> rb_nan = rb;
    poison(rb_nan, g.OC, OP);  // (the residual's padding must be 0 for the output's to be: not poisoned below)
    for (std::optional<float> s : {std::optional<float>(), std::optional<float>(0.02f)}) {
      for (QIsa isa : isas()) {
        const PackedOperand p = conv2d_int8_pack(g, w.data(), isa);
        std::vector<float> want(size_t(g.N * g.OC * OP)), wantb(size_t(g.N * OCB * L * OP));
        g.L = 0;
        conv2d_int8(g, isa, x.data(), p, s, ep, with_res ? res.data() : nullptr, want.data());
        nchw_to_nchwc(want.data(), g.N, g.OC, OP, L, wantb.data());
        g.L = L;
        std::vector<float> got(wantb.size(), -7.0f);
        conv2d_int8(g, isa, xb.data(), p, s, ep, with_res ? rb.data() : nullptr, got.data());
        const std::string what = std::string(qisa_name(isa)) + " L=" + std::to_string(L) + " C=" +
                                 std::to_string(c.C) + " OC=" + std::to_string(c.OC) + " variant " +
                                 std::to_string(v) + (s ? " static" : " dynamic") + " threads=" +
                                 std::to_string(threads);
        expect_close(got, wantb, what);
        for (size_t i = 0; i < got.size(); ++i)
          if (std::isnan(rb_nan[i])) ASSERT_EQ(got[i], 0.0f) << what << ": padding channel at " << i;
        // x NCHW, the residual and y blocked (a stem writing the blocked layout)
        g.x_nchw = true;
        std::vector<float> got_n(wantb.size(), -7.0f);
        conv2d_int8(g, isa, x.data(), p, s, ep, with_res ? rb.data() : nullptr, got_n.data());
        g.x_nchw = false;
        expect_close(got_n, wantb, what + " x NCHW");
        for (size_t i = 0; i < got_n.size(); ++i)
          if (std::isnan(rb_nan[i])) ASSERT_EQ(got_n[i], 0.0f) << what << " x NCHW: padding channel at " << i;
      }
    }
  });
}

// AVX-512's direct rows (each window read in place from a zero-padded copy of the input
// codes, one run per kernel row) give the window rows' results bit for bit: the same
// integer sums in the same order. Floats in and codes in (with the NaN mark), floats,
// codes or both out, a residual as codes, static and dynamic scales, 1 and 2 threads.
TEST(QuantConv, DirectRowsEqualWindowRows) {
  if (!qisa_supported(QIsa::kAvx512)) GTEST_SKIP() << "no AVX-512 VNNI";
  unsigned seed = 900;
  int taken = 0, expected = 0;
  unsetenv("ZENITH_INT8_DIRECT");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : kCases) {
      // Channels in whole 32s, dilation 1, not a 1x1 read in place (unpadded; dilation 2 still runs: window rows
      // both ways); a stem's short runs (KW x C <= 32, floats in) are not among these cases.
      if (c.C % 32 || (c.KH * c.KW == 1 && c.ph == 0 && c.pw == 0) || c.KW * c.C <= 32) continue;
      const bool eligible = c.dh == 1 && c.dw == 1 && geom(c).OH > 0 && geom(c).OW > 0;  // (5x5 on 4 x 4: no output)
      Conv2dInt8Geom g = geom(c);
      g.L = 16;
      const int64_t HW = g.H * g.W, OP = g.OH * g.OW, CB = (g.C + 15) / 16, OCB = (g.OC + 15) / 16;
      auto x = randn(size_t(g.N * g.C * HW), seed++, 2.0f);
      x[size_t(HW + 3)] = std::numeric_limits<float>::quiet_NaN();  // image 0, channel 1, pixel 3
      std::vector<float> xb(size_t(g.N * CB * 16 * HW));
      nchw_to_nchwc(x.data(), g.N, g.C, HW, 16, xb.data());
      std::vector<int8_t> xq(size_t(g.N * HW * g.C)), rq(size_t(g.N * OP * g.OC));
      std::mt19937 rng(seed++);
      for (auto* v : {&xq, &rq})
        for (int8_t& q : *v) q = int8_t(int(rng() % 255) - 127);
      xq[size_t(g.C * (HW - 1))] = -128;  // image 0's last pixel: a NaN mark
      const auto w = random_filters(g.OC, g.K(), seed++);
      const auto shift = randn(size_t(g.OC), seed++);
      const PackedOperand p = conv2d_int8_pack(g, w.data(), QIsa::kAvx512);
      for (int variant = 0; variant < 6; ++variant) {
        GemmEpilogue ep;
        ep.row_shift = shift.data();
        ep.act = variant % 2 ? Activation::kRelu : Activation::kNone;
        const bool codes_in = variant >= 2, codes_only = variant >= 4;
        const std::optional<float> s = codes_in || variant == 1 ? std::optional<float>(0.03f) : std::nullopt;
        auto run = [&](bool direct, std::vector<float>& y, std::vector<int8_t>& yq) {
          const int64_t before = conv2d_int8_direct_calls();
          if (!direct) setenv("ZENITH_INT8_DIRECT", "0", 1);
          Conv2dInt8Codes io;
          io.x = codes_in ? xq.data() : nullptr;
          io.y = yq.data();
          io.y_scale = 0.05f;
          io.res = codes_in ? rq.data() : nullptr;
          io.res_scale = 0.02f;
          conv2d_int8(g, QIsa::kAvx512, xb.data(), p, s, ep, nullptr, codes_only ? nullptr : y.data(), io);
          unsetenv("ZENITH_INT8_DIRECT");
          taken += int(conv2d_int8_direct_calls() - before);
        };
        std::vector<float> y1(size_t(g.N * OCB * 16 * OP), -7.0f), y0(y1);
        std::vector<int8_t> q1(size_t(g.N * OP * g.OC), 5), q0(q1);
        run(true, y1, q1);
        run(false, y0, q0);
        const std::string what = "C=" + std::to_string(c.C) + " " + std::to_string(c.KH) + "x" + std::to_string(c.KW) +
                                 " variant " + std::to_string(variant) + " threads " + std::to_string(threads);
        for (size_t i = 0; i < y0.size(); ++i)
          ASSERT_TRUE(y1[i] == y0[i] || (std::isnan(y1[i]) && std::isnan(y0[i]))) << what << " at " << i;
        ASSERT_EQ(q1, q0) << what;
        expected += eligible;
        ASSERT_EQ(taken, expected) << what << ": direct rows taken where they apply, and only in the first run";
      }
    }
  }
  set_num_threads(1);
  EXPECT_EQ(expected, 2 * 6 * 6);  // 2 thread counts x 6 variants x 6 cases that take them
}

// Codes between int8 convs (Conv2dInt8Codes): a conv writing codes writes exactly the
// codes of the floats it would have written (round half to even within +-127, -128 for a
// NaN or infinity), and a conv reading codes gives exactly what it gives reading the floats
// they were made from (its residual as codes: within rounding of the floats they stand
// for): NaN included, strided 1x1s, both thread counts, both blocks, every ISA, with and
// without a residual, every epilogue shape.
TEST(QuantConv, CodesBetweenConvsMatchFloats) {
  unsigned seed = 300;
  const Activation acts[] = {Activation::kNone, Activation::kRelu, Activation::kHardswish, Activation::kGelu};
  auto code = [](float v, float inv) -> int8_t {
    if (!std::isfinite(v)) return -128;
    return int8_t(std::min(127.0f, std::max(-127.0f, std::nearbyint(v * inv))));
  };
  int variant = 0;
  for_each_blocked_case([&](int threads, const Case& c, int64_t L) {
    Conv2dInt8Geom g = geom(c);
    g.L = L;
    const int64_t HW = g.H * g.W, OP = g.OH * g.OW, CB = (g.C + L - 1) / L, OCB = (g.OC + L - 1) / L;
    auto x = randn(size_t(g.N * g.C * HW), seed++, 2.0f);
    if (c.C == 17) x[size_t(HW + 5)] = std::numeric_limits<float>::quiet_NaN();  // channel 1, pixel 5
    if (c.C == 64) x[size_t(HW + 3)] = std::numeric_limits<float>::quiet_NaN();  // pixel 3: read by the strided 1x1s
    if (c.C == 16) x[size_t(2)] = 1e38f;  // pixel 2, read: past 2^31 codes, clamped to 127, not wrapped
    auto w = random_filters(g.OC, g.K(), seed++);
    auto scale = randn(size_t(g.OC), seed++), shift = randn(size_t(g.OC), seed++);
    shift[3 % shift.size()] = std::numeric_limits<float>::infinity();  // a channel of infinite outputs (with a shift)
    auto res = randn(size_t(g.N * g.OC * OP), seed++);
    if (!res.empty()) res[7 % res.size()] = std::numeric_limits<float>::infinity();  // an infinite output: code -128
    // The same variant for both block widths (L = 8 then 16), so each width meets every
    // activation, residual and scale choice.
    const int v = variant++ / 2;
    GemmEpilogue ep;
    ep.row_scale = v % 2 ? scale.data() : nullptr;
    ep.row_shift = v % 3 ? shift.data() : nullptr;
    ep.act = acts[v % 4];
    const float* rp = nullptr;
    std::vector<float> xb(size_t(g.N * CB * L * HW)), rb(size_t(g.N * OCB * L * OP));
    nchw_to_nchwc(x.data(), g.N, g.C, HW, L, xb.data());
    nchw_to_nchwc(res.data(), g.N, g.OC, OP, L, rb.data());
    if (v % 4 < 2) rp = rb.data();
    const float xs = 0.02f, ys = v % 2 ? 0.5f : 0.013f, xinv = 1.0f / xs, yinv = 1.0f / ys;
    // x's codes [N, H, W, C]
    std::vector<int8_t> xq(size_t(g.N * HW * g.C));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t ch = 0; ch < g.C; ++ch)
        for (int64_t p = 0; p < HW; ++p)
          xq[size_t((n * HW + p) * g.C + ch)] = code(x[size_t((n * g.C + ch) * HW + p)], xinv);
    for (QIsa isa : isas()) {
      const PackedOperand pk = conv2d_int8_pack(g, w.data(), isa);
      const std::string what = std::string(qisa_name(isa)) + " L=" + std::to_string(L) + " C=" +
                               std::to_string(c.C) + " OC=" + std::to_string(c.OC) + " variant " +
                               std::to_string(v) + " threads=" + std::to_string(threads);
      std::vector<float> want(rb.size(), -7.0f), got(rb.size(), -7.0f);
      conv2d_int8(g, isa, xb.data(), pk, xs, ep, rp, want.data());
      // codes in: the same floats out, bit for bit (NaN where the floats gave NaN)
      Conv2dInt8Codes in;
      in.x = xq.data();
      conv2d_int8(g, isa, nullptr, pk, xs, ep, rp, got.data(), in);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
            << what << ": codes in, at " << i << ": " << got[i] << " vs " << want[i];
      // codes out (from floats, and from codes; alone, and beside the floats; and from an
      // NCHW x, as a stem writes them): the floats' codes
      for (int mode = 0; mode < 6; ++mode) {
        const bool x_nchw = mode >= 4, codes_in = !x_nchw && (mode & 1), both = x_nchw ? mode & 1 : mode & 2;
        std::vector<int8_t> yq(size_t(g.N * OP * g.OC), 99);
        std::vector<float> yf(rb.size(), -7.0f);
        Conv2dInt8Codes io;
        io.x = codes_in ? xq.data() : nullptr;
        io.y = yq.data();
        io.y_scale = ys;
        Conv2dInt8Geom gm = g;
        gm.x_nchw = x_nchw;
        conv2d_int8(gm, isa, codes_in ? nullptr : x_nchw ? x.data() : xb.data(), pk, xs, ep, rp,
                    both ? yf.data() : nullptr, io);
        if (both)
          for (size_t i = 0; i < yf.size(); ++i)
            ASSERT_TRUE(yf[i] == want[i] || (std::isnan(yf[i]) && std::isnan(want[i])))
                << what << ": floats beside codes, at " << i << ": " << yf[i] << " vs " << want[i];
        for (int64_t n = 0; n < g.N; ++n)
          for (int64_t oc = 0; oc < g.OC; ++oc)
            for (int64_t p = 0; p < OP; ++p) {
              const float f = want[size_t(((n * OCB + oc / L) * OP + p) * L + oc % L)];
              ASSERT_EQ(int(yq[size_t((n * OP + p) * g.OC + oc)]), int(code(f, yinv)))
                  << what << (codes_in ? ": codes in and out" : ": codes out") << (both ? " beside floats" : "")
                  << " at n " << n << " oc " << oc
                  << " pixel " << p << " from " << f;
            }
      }
      // codes alone with no residual at all (a bottleneck's first convs): the floats'
      // codes, from floats and from codes in
      {
        std::vector<float> want0(rb.size(), -7.0f);
        conv2d_int8(g, isa, xb.data(), pk, xs, ep, nullptr, want0.data());
        for (const bool codes_in : {false, true}) {
          std::vector<int8_t> alone(size_t(g.N * OP * g.OC), 99);
          Conv2dInt8Codes io;
          io.x = codes_in ? xq.data() : nullptr;
          io.y = alone.data();
          io.y_scale = ys;
          conv2d_int8(g, isa, codes_in ? nullptr : xb.data(), pk, xs, ep, nullptr, nullptr, io);
          for (int64_t n = 0; n < g.N; ++n)
            for (int64_t oc = 0; oc < g.OC; ++oc)
              for (int64_t p = 0; p < OP; ++p) {
                const float f = want0[size_t(((n * OCB + oc / L) * OP + p) * L + oc % L)];
                ASSERT_EQ(int(alone[size_t((n * OP + p) * g.OC + oc)]), int(code(f, yinv)))
                    << what << ": codes alone, no residual" << (codes_in ? ", codes in" : "") << " at n " << n
                    << " oc " << oc << " pixel " << p << " from " << f;
              }
        }
      }
      // the residual as codes: what the floats they stand for give
      if (rp) {
        const float rs = 0.03f;
        std::vector<int8_t> rq(size_t(g.N * OP * g.OC));
        std::vector<float> rdq(size_t(g.N * g.OC * OP)), rdqb(rb.size());
        for (int64_t n = 0; n < g.N; ++n)
          for (int64_t oc = 0; oc < g.OC; ++oc)
            for (int64_t p = 0; p < OP; ++p) {
              int8_t q = code(res[size_t((n * g.OC + oc) * OP + p)], 1.0f / rs);
              if ((n + oc + p) % 97 == 0) q = -128;  // marks: NaN
              rq[size_t((n * OP + p) * g.OC + oc)] = q;
              rdq[size_t((n * g.OC + oc) * OP + p)] =
                  q == -128 ? std::numeric_limits<float>::quiet_NaN() : float(q) * rs;
            }
        nchw_to_nchwc(rdq.data(), g.N, g.OC, OP, L, rdqb.data());
        std::vector<float> want_r(rb.size(), -7.0f), got_r(rb.size(), -7.0f);
        conv2d_int8(g, isa, xb.data(), pk, xs, ep, rdqb.data(), want_r.data());
        Conv2dInt8Codes io;
        io.res = rq.data();
        io.res_scale = rs;
        std::vector<int8_t> yq(size_t(g.N * OP * g.OC), 99);
        io.y = yq.data();
        io.y_scale = ys;
        conv2d_int8(g, isa, xb.data(), pk, xs, ep, nullptr, got_r.data(), io);
        // (within rounding: the compiler may fuse the code's product into the add)
        for (size_t i = 0; i < got_r.size(); ++i)
          ASSERT_TRUE(got_r[i] == want_r[i] ||  // infinities too
                      std::fabs(got_r[i] - want_r[i]) <= 1e-5f * (1.0f + std::fabs(want_r[i])) ||
                      (std::isnan(got_r[i]) && std::isnan(want_r[i])))
              << what << ": residual codes, at " << i << ": " << got_r[i] << " vs " << want_r[i];
        for (int64_t n = 0; n < g.N; ++n)  // the codes are those of the floats written beside them
          for (int64_t oc = 0; oc < g.OC; ++oc)
            for (int64_t p = 0; p < OP; ++p)
              ASSERT_EQ(int(yq[size_t((n * OP + p) * g.OC + oc)]),
                        int(code(got_r[size_t(((n * OCB + oc / L) * OP + p) * L + oc % L)], yinv)))
                  << what << ": residual codes, codes out at n " << n << " oc " << oc << " pixel " << p;
        // the codes alone (no floats beside them: written pixel by pixel), from floats and
        // from codes in: the same codes
        for (const bool codes_in : {false, true}) {
          std::vector<int8_t> alone(yq.size(), 99);
          Conv2dInt8Codes io2 = io;
          io2.x = codes_in ? xq.data() : nullptr;
          io2.y = alone.data();
          conv2d_int8(g, isa, codes_in ? nullptr : xb.data(), pk, xs, ep, nullptr, nullptr, io2);
          for (size_t i = 0; i < yq.size(); ++i)
            ASSERT_EQ(int(alone[i]), int(yq[i])) << what << ": residual codes, codes alone"
                                                 << (codes_in ? " from codes" : "") << ", at " << i;
        }
      }
    }
  });
  Conv2dInt8Geom g = geom(kCases[1]);
  const auto w = random_filters(g.OC, g.K(), 1);
  const PackedOperand pk = conv2d_int8_pack(g, w.data(), QIsa::kScalar);
  std::vector<int8_t> xq(size_t(g.N * g.H * g.W * g.C)), yq(size_t(g.N * g.OH * g.OW * g.OC));
  Conv2dInt8Codes in;
  in.x = xq.data();
  EXPECT_THROW(conv2d_int8(g, QIsa::kScalar, nullptr, pk, 0.1f, {}, nullptr, nullptr, in), Error);  // NCHW
  g.L = 8;
  EXPECT_THROW(conv2d_int8(g, QIsa::kScalar, nullptr, pk, std::nullopt, {}, nullptr, nullptr, in), Error);  // no scale
  Conv2dInt8Codes out;
  out.y = yq.data();
  EXPECT_THROW(conv2d_int8(g, QIsa::kScalar, nullptr, pk, 0.1f, {}, nullptr, nullptr, out), Error);  // no y scale
  Conv2dInt8Codes rin;
  rin.res = yq.data();
  std::vector<float> x(size_t(g.N * 8 * g.H * g.W)), y(size_t(g.N * 40 * g.OH * g.OW));
  EXPECT_THROW(conv2d_int8(g, QIsa::kScalar, x.data(), pk, 0.1f, {}, nullptr, y.data(), rin), Error);  // no scale
  EXPECT_THROW(conv2d_int8(g, QIsa::kScalar, x.data(), pk, 0.1f, {}, nullptr, nullptr), Error);  // no output
  set_num_threads(1);
}

// In the IR: conv2d with a u8 weight, the runtime packing the constant filters once, and
// batch-norm, residual and ReLU fused into it (the passes ResNet's blocks go through)
// giving what the unfused graph gives.
TEST(QuantConv, RuntimeFusesEpiloguesIntoTheInt8Conv) {
  set_num_threads(2);
  const int64_t C = 16, OC = 24, K = C * 9;
  auto x = randn(size_t(2 * C * 10 * 10), 20);
  auto res = randn(size_t(2 * OC * 10 * 10), 21);
  auto w = random_filters(OC, K, 22);
  auto bias = randn(size_t(OC), 23);
  auto bw = randn(size_t(OC), 24), bb = randn(size_t(OC), 25), mu = randn(size_t(OC), 26);
  std::vector<float> var(static_cast<size_t>(OC));
  for (size_t i = 0; i < var.size(); ++i) var[i] = 0.5f + 0.1f * float(i);
  const std::string text = R"(graph(%x: f32[2, 16, 10, 10], %w: u8[24, 148], %b: f32[24], %bw: f32[24], %bb: f32[24], %mu: f32[24], %var: f32[24], %r: f32[2, 24, 10, 10]) {
  %c: f32[2, 24, 10, 10] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1], kernel=[3, 3], x_scale=f[0.05]}
  %n: f32[2, 24, 10, 10] = batch_norm(%c, %bw, %bb, %mu, %var) {eps=f[1e-05]}
  %a: f32[2, 24, 10, 10] = add(%n, %r)
  %y: f32[2, 24, 10, 10] = relu(%a)
  return (%y)
})";
  Graph fused = parse_graph(text), plain = parse_graph(text);
  ASSERT_EQ(fuse_conv_bn(fused), 1);
  ASSERT_EQ(fuse_conv_residual(fused), 1);
  ASSERT_EQ(fuse_epilogue(fused), 1);
  dead_code_elimination(fused);
  ASSERT_EQ(fused.nodes.size(), 1u);
  const std::vector<InTensor> in = {{x.data(), DType::f32, {2, C, 10, 10}}, {w.data(), DType::u8, {OC, 4 + K}},
                                    {bias.data(), DType::f32, {OC}},      {bw.data(), DType::f32, {OC}},
                                    {bb.data(), DType::f32, {OC}},        {mu.data(), DType::f32, {OC}},
                                    {var.data(), DType::f32, {OC}},       {res.data(), DType::f32, {2, OC, 10, 10}}};
  Executable a(fused), b(plain);
  a.set_constant_inputs({1});
  auto ya = a.run(in, {});
  auto yb = b.run(in, {});
  EXPECT_EQ(a.packed_bytes(), size_t(OC * K));
  const float* pa = static_cast<const float*>(ya[0].data);
  const float* pb = static_cast<const float*>(yb[0].data);
  for (int64_t i = 0; i < 2 * OC * 100; ++i) ASSERT_NEAR(pa[i], pb[i], 1e-4f * (1 + std::fabs(pb[i]))) << i;
  set_num_threads(1);
}

// layout_nchwc takes int8 convs into the blocked chain beside float32 ones (an int8 stem
// over 3 channels reads its NCHW image and writes the blocked output, as float32 stems do), and
// the blocked graph gives the NCHW graph's values: 20 channels (a partial block), a
// dynamic and a static scale, a residual from the float32 conv, a conv without a bias
// (whose bias slot repeats the u8 weight, as batch-norm-folded convs have it).
TEST(QuantConv, LayoutPassBlocksInt8Convs) {
  set_num_threads(2);
  const std::string text = R"(graph(%x: f32[2, 3, 12, 12], %w0: u8[20, 31], %b0: f32[20], %w1: f32[24, 20, 3, 3], %b: f32[24], %w2: u8[24, 220], %w3: u8[24, 28]) {
  %a: f32[2, 20, 12, 12] = conv2d(%x, %w0, %b0) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1], kernel=[3, 3], x_scale=f[0.05], activation=[1]}
  %c: f32[2, 24, 12, 12] = conv2d(%a, %w1, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1], activation=[1]}
  %d: f32[2, 24, 12, 12] = conv2d(%c, %w2, %w2) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[0], kernel=[3, 3], activation=[1]}
  %e: f32[2, 24, 12, 12] = conv2d(%d, %w3, %b, %c) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1], x_scale=f[0.04], has_residual=[1], activation=[1]}
  return (%e)
})";
  Graph plain = parse_graph(text), g = parse_graph(text);
  EXPECT_EQ(layout_nchwc(g), 4);
  dead_code_elimination(g);
  verify(g);
  std::map<Op, int> ops;
  for (const Node& n : g.nodes) ++ops[n.op];
  EXPECT_EQ(ops[Op::conv2d], 0);
  EXPECT_EQ(ops[Op::conv2d_nchwc], 4);  // the int8 stem with `block`
  EXPECT_EQ(ops[Op::to_nchwc], 0);
  EXPECT_EQ(ops[Op::from_nchwc], 1);
  for (const Node& n : g.nodes)
    if (n.op == Op::conv2d_nchwc && n.inputs[0] == 0) EXPECT_EQ(n.i("block", 0), nchwc_block());
  auto x = randn(2 * 3 * 144, 40), b0 = randn(20, 41), w1 = randn(24 * 20 * 9, 42, 0.1f), b = randn(24, 43);
  auto w0 = random_filters(20, 27, 44), w2 = random_filters(24, 216, 45), w3 = random_filters(24, 24, 46);
  const std::vector<InTensor> in = {{x.data(), DType::f32, {2, 3, 12, 12}}, {w0.data(), DType::u8, {20, 31}},
                                    {b0.data(), DType::f32, {20}},           {w1.data(), DType::f32, {24, 20, 3, 3}},
                                    {b.data(), DType::f32, {24}},            {w2.data(), DType::u8, {24, 220}},
                                    {w3.data(), DType::u8, {24, 28}}};
  Executable a(std::move(plain)), bl(std::move(g));
  a.set_constant_inputs({1, 3, 5, 6});
  bl.set_constant_inputs({1, 3, 5, 6});
  auto want = a.run(in, {}), got = bl.run(in, {});
  const float* pw = static_cast<const float*>(want[0].data);
  const float* pg = static_cast<const float*>(got[0].data);
  for (int64_t i = 0; i < 2 * 24 * 144; ++i) ASSERT_NEAR(pg[i], pw[i], 1e-4f * (1 + std::fabs(pw[i]))) << i;
  set_num_threads(1);
}

// chain_int8 passes codes between blocked int8 convs on one scale: a 1x1 into a 3x3; the
// 3x3 into a 1x1 with a residual, a strided 1x1 (both on its scale) and, as its residual,
// a third 1x1; and a graph output that an int8 conv also reads, written both as floats and
// as codes. With ZENITH_INT8_CHAIN=exact (residuals stay float) the graph gives the same
// values, bit for bit, as without the pass; by default the residual read as codes moves
// that conv's output by exactly the residual's rounding to its codes.
TEST(QuantConv, ChainPassPassesCodesBetweenInt8Convs) {
  set_num_threads(2);
  const std::string text = kInt8ChainGraph;
  Graph blocked = parse_graph(text);
  EXPECT_EQ(layout_nchwc(blocked), 6);
  dead_code_elimination(blocked);
  auto count = [](const Graph& g, int& codes_out, int& codes_in, int& both, int& res_codes) {
    codes_out = codes_in = both = res_codes = 0;
    for (const Node& n : g.nodes) {
      if (n.op != Op::conv2d_nchwc) continue;
      codes_out += g.type(n.outputs.back()).dtype == DType::u8;
      codes_in += g.type(n.inputs[0]).dtype == DType::u8;
      both += n.outputs.size() == 2;
      res_codes += n.has("r_scale");
    }
  };
  int codes_out, codes_in, both, res_codes;
  Graph exact = blocked, chained = blocked;
  setenv("ZENITH_INT8_CHAIN", "exact", 1);
  EXPECT_EQ(chain_int8(exact), 4);  // %a; %c, %d and %f (floats and codes: %h's residual, graph outputs)
  unsetenv("ZENITH_INT8_CHAIN");
  verify(exact);
  count(exact, codes_out, codes_in, both, res_codes);
  EXPECT_EQ(codes_out, 4);
  EXPECT_EQ(codes_in, 5);
  EXPECT_EQ(both, 3);
  EXPECT_EQ(res_codes, 0);
  EXPECT_EQ(chain_int8(chained), 4);  // the same, %h reading %c's codes as its residual
  verify(chained);
  count(chained, codes_out, codes_in, both, res_codes);
  EXPECT_EQ(both, 3);  // %c still a graph output
  EXPECT_EQ(res_codes, 1);
  const std::string printed = print_graph(chained);  // the two outputs print and parse back
  EXPECT_NE(printed.find("y_float"), std::string::npos) << printed;
  verify(parse_graph(printed));
  auto x = randn(2 * 20 * 144, 60), b = randn(24, 61);
  auto w0 = random_filters(24, 20, 62), w1 = random_filters(24, 216, 63), w2 = random_filters(20, 24, 64),
       w3 = random_filters(20, 24, 65), w4 = random_filters(16, 20, 66), w5 = random_filters(24, 16, 67);
  const std::vector<InTensor> in = {{x.data(), DType::f32, {2, 20, 12, 12}}, {w0.data(), DType::u8, {24, 24}},
                                    {w1.data(), DType::u8, {24, 220}},      {w2.data(), DType::u8, {20, 28}},
                                    {w3.data(), DType::u8, {20, 28}},       {w4.data(), DType::u8, {16, 24}},
                                    {b.data(), DType::f32, {24}},           {w5.data(), DType::u8, {24, 20}}};
  Executable want_exe(std::move(blocked)), exact_exe(std::move(exact)), got_exe(std::move(chained));
  for (Executable* e : {&want_exe, &exact_exe, &got_exe}) e->set_constant_inputs({1, 2, 3, 4, 5, 7});
  auto want = want_exe.run(in, {}), same = exact_exe.run(in, {}), got = got_exe.run(in, {});
  ASSERT_EQ(got.size(), 5u);
  const int64_t sizes[] = {2 * 20 * 36, 2 * 16 * 144, 2 * 20 * 144, 2 * 24 * 144, 2 * 24 * 144};
  auto at = [](const std::vector<OutTensor>& t, size_t o) { return static_cast<const float*>(t[o].data); };
  for (size_t o = 0; o < 5; ++o) {
    ASSERT_EQ(got[o].dtype, DType::f32);
    for (int64_t i = 0; i < sizes[o]; ++i) {
      ASSERT_EQ(at(same, o)[i], at(want, o)[i]) << "exact: output " << o << " at " << i;
      if (o != 3) ASSERT_EQ(at(got, o)[i], at(want, o)[i]) << "output " << o << " at " << i;
    }
  }
  // %h = conv(%f) + %c, with %c as codes on %d's and %e's scale, 0.3: clamp(round(c / 0.3)) * 0.3
  double moved = 0;
  for (int64_t i = 0; i < sizes[3]; ++i) {
    const float c = at(want, 4)[i], q = std::min(127.0f, std::max(-127.0f, std::nearbyint(c * (1.0f / 0.3f)))) * 0.3f;
    ASSERT_NEAR(at(got, 3)[i] - at(want, 3)[i], q - c, 1e-4f * (1 + std::fabs(at(want, 3)[i]))) << i;
    moved += std::fabs(q - c);
  }
  EXPECT_GT(moved, 0.0);  // the residual's codes were read
  // ZENITH_INT8_CHAIN=0: no codes
  Graph off = parse_graph(text);
  layout_nchwc(off);
  dead_code_elimination(off);
  setenv("ZENITH_INT8_CHAIN", "0", 1);
  EXPECT_EQ(chain_int8(off), 0);
  unsetenv("ZENITH_INT8_CHAIN");
  set_num_threads(1);
}

// chain_int8 passes codes through a blocked max pool between int8 convs (a stem under
// ReLU, its pool, two convs reading the pool on one scale, one with a residual): the stem
// writes codes, the pool becomes max_pool2d_codes, the convs read codes; with residuals
// float (ZENITH_INT8_CHAIN=exact) the graph gives the same values bit for bit, a NaN in
// the image included. A stem with no ReLU (whose -inf a float pool would pass over),
// readers on two scales, or a pool whose output the graph returns keep the pool float.
TEST(QuantConv, ChainPassPoolsCodes) {
  set_num_threads(2);
  const std::string text = R"(graph(%x: f32[2, 3, 13, 13], %w0: u8[20, 31], %b0: f32[20], %w1: u8[24, 24], %b: f32[24], %w2: u8[24, 24]) {
  %a: f32[2, 20, 13, 13] = conv2d(%x, %w0, %b0) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1], kernel=[3, 3], x_scale=f[0.05], activation=[1]}
  %p: f32[2, 20, 7, 7] = max_pool2d(%a) {kernel=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1]}
  %c: f32[2, 24, 7, 7] = conv2d(%p, %w1, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1], x_scale=f[0.04], activation=[1]}
  %d: f32[2, 24, 7, 7] = conv2d(%p, %w2, %b, %c) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1], x_scale=f[0.04], has_residual=[1], activation=[1]}
  return (%d)
})";
  auto prepared = [](const std::string& t) {
    Graph g = parse_graph(t);
    layout_nchwc(g);
    dead_code_elimination(g);
    return g;
  };
  auto pools = [](const Graph& g, Op op) {
    return std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; });
  };
  Graph blocked = prepared(text), chained = blocked;
  ASSERT_EQ(pools(blocked, Op::max_pool2d_nchwc), 1) << print_graph(blocked);
  setenv("ZENITH_INT8_CHAIN", "exact", 1);
  EXPECT_EQ(chain_int8(chained), 1);
  unsetenv("ZENITH_INT8_CHAIN");
  verify(chained);
  EXPECT_EQ(pools(chained, Op::max_pool2d_codes), 1) << print_graph(chained);
  for (const Node& n : chained.nodes)
    if (n.op == Op::conv2d_nchwc && n.inputs[0] != 0) EXPECT_EQ(chained.type(n.inputs[0]).dtype, DType::u8);
  verify(parse_graph(print_graph(chained)));
  auto x = randn(2 * 3 * 169, 80), b0 = randn(20, 81), b = randn(24, 82);
  x[100] = std::numeric_limits<float>::quiet_NaN();
  auto w0 = random_filters(20, 27, 83), w1 = random_filters(24, 20, 84), w2 = random_filters(24, 20, 85);
  const std::vector<InTensor> in = {{x.data(), DType::f32, {2, 3, 13, 13}}, {w0.data(), DType::u8, {20, 31}},
                                    {b0.data(), DType::f32, {20}},           {w1.data(), DType::u8, {24, 24}},
                                    {b.data(), DType::f32, {24}},            {w2.data(), DType::u8, {24, 24}}};
  Executable want_exe(std::move(blocked)), got_exe(std::move(chained));
  for (Executable* e : {&want_exe, &got_exe}) e->set_constant_inputs({1, 3, 5});
  auto want = want_exe.run(in, {}), got = got_exe.run(in, {});
  const float* pw = static_cast<const float*>(want[0].data);
  const float* pg = static_cast<const float*>(got[0].data);
  int nans = 0;
  for (int64_t i = 0; i < 2 * 24 * 49; ++i) {
    nans += std::isnan(pw[i]);
    ASSERT_TRUE(pg[i] == pw[i] || (std::isnan(pg[i]) && std::isnan(pw[i]))) << i << ": " << pg[i] << " vs " << pw[i];
  }
  EXPECT_GT(nans, 0);  // the NaN went through the pool
  auto replaced = [&](std::string t, const std::string& from, const std::string& to) {
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  const std::string no_relu = replaced(text, "x_scale=f[0.05], activation=[1]", "x_scale=f[0.05]");
  const std::string two_scales = replaced(text, "x_scale=f[0.04], has_residual", "x_scale=f[0.03], has_residual");
  const std::string pool_out = replaced(text, "return (%d)", "return (%d, %p)");
  for (const std::string& t : {no_relu, two_scales, pool_out}) {
    Graph g = prepared(t);
    chain_int8(g);
    verify(g);
    EXPECT_EQ(pools(g, Op::max_pool2d_codes), 0) << print_graph(g);
  }
  // Taken too, bit for bit with residuals float: a stem under ReLU6, and a producer that
  // reads codes itself (a conv after the stem, then the pool: VGG's conv -> conv -> pool)
  const std::string relu6 = replaced(text, "x_scale=f[0.05], activation=[1]", "x_scale=f[0.05], activation=[6]");
  const std::string deep = replaced(
      replaced(replaced(text, "%w2: u8[24, 24])", "%w2: u8[24, 24], %w4: u8[20, 184])"),
               "  %p: f32[2, 20, 7, 7] = max_pool2d(%a)",
               "  %a2: f32[2, 20, 13, 13] = conv2d(%a, %w4, %b0) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], "
               "has_bias=[1], kernel=[3, 3], x_scale=f[0.06], activation=[1]}\n  %p: f32[2, 20, 7, 7] = max_pool2d(%a2)"),
      "x_scale=f[0.05], activation=[1]", "x_scale=f[0.05], activation=[1]");
  auto w4 = random_filters(20, 180, 86);
  std::vector<InTensor> in_deep = in;
  in_deep.push_back({w4.data(), DType::u8, {20, 184}});
  for (const auto& [t, ins, changes] : {std::tuple{relu6, in, 1}, std::tuple{deep, in_deep, 2}}) {
    Graph g0 = prepared(t), g = g0;
    setenv("ZENITH_INT8_CHAIN", "exact", 1);
    EXPECT_EQ(chain_int8(g), changes) << print_graph(g);
    unsetenv("ZENITH_INT8_CHAIN");
    verify(g);
    EXPECT_EQ(pools(g, Op::max_pool2d_codes), 1) << print_graph(g);
    Executable e0(std::move(g0)), e1(std::move(g));
    auto a = e0.run(ins, {}), c = e1.run(ins, {});
    const float* pa = static_cast<const float*>(a[0].data);
    const float* pc = static_cast<const float*>(c[0].data);
    for (int64_t i = 0; i < 2 * 24 * 49; ++i)
      ASSERT_TRUE(pc[i] == pa[i] || (std::isnan(pc[i]) && std::isnan(pa[i]))) << i << ": " << pc[i] << " vs " << pa[i];
  }
  // The pool's output read as a residual as well (ResNet-18's first block): by default that
  // reader takes the codes too (r_scale), the residual then rounded to the scale, 0.04
  const std::string res_pool = R"(graph(%x: f32[2, 3, 13, 13], %w0: u8[20, 31], %b0: f32[20], %w1: u8[24, 24], %b: f32[24], %w2: u8[20, 28]) {
  %a: f32[2, 20, 13, 13] = conv2d(%x, %w0, %b0) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[1], kernel=[3, 3], x_scale=f[0.05], activation=[1]}
  %p: f32[2, 20, 7, 7] = max_pool2d(%a) {kernel=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1]}
  %c: f32[2, 24, 7, 7] = conv2d(%p, %w1, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1], x_scale=f[0.04], activation=[1]}
  %e: f32[2, 20, 7, 7] = conv2d(%c, %w2, %b0, %p) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1], x_scale=f[0.3], has_residual=[1], activation=[1]}
  return (%e)
})";
  {
    Graph g0 = prepared(res_pool), g = g0;
    EXPECT_EQ(chain_int8(g), 2) << print_graph(g);  // the pool's codes, and %c's into %e
    verify(g);
    EXPECT_EQ(pools(g, Op::max_pool2d_codes), 1) << print_graph(g);
    int r_codes = 0;
    for (const Node& n : g.nodes) r_codes += n.has("r_scale");
    EXPECT_EQ(r_codes, 1) << print_graph(g);
    auto w5 = random_filters(20, 24, 87);
    std::vector<InTensor> ins = {in[0], in[1], in[2], in[3], in[4], {w5.data(), DType::u8, {20, 28}}};
    Executable e0(std::move(g0)), e1(std::move(g));
    for (Executable* e : {&e0, &e1}) e->set_constant_inputs({1, 3, 5});
    // the pooled floats themselves, from the same graph returning them (which keeps the pool float)
    Executable e_p(prepared(replaced(res_pool, "return (%e)", "return (%e, %p)")));
    e_p.set_constant_inputs({1, 3, 5});
    auto a = e0.run(ins, {}), c = e1.run(ins, {}), with_p = e_p.run(ins, {});
    const float* pa = static_cast<const float*>(a[0].data);
    const float* pc = static_cast<const float*>(c[0].data);
    const float* pp = static_cast<const float*>(with_p[1].data);
    double moved = 0;
    for (int64_t i = 0; i < 2 * 20 * 49; ++i) {
      if (std::isnan(pa[i]) || std::isnan(pc[i])) {
        ASSERT_TRUE(std::isnan(pa[i]) && std::isnan(pc[i])) << i;
        continue;
      }
      // relu(conv + q(p)) is at most |q(p) - p| from relu(conv + p); q rounds (and clips) p to codes on 0.04
      const float q = std::min(127.0f, std::max(-127.0f, std::nearbyint(pp[i] * (1.0f / 0.04f)))) * 0.04f;
      ASSERT_LE(std::fabs(pc[i] - pa[i]), std::fabs(q - pp[i]) + 1e-4f * (1 + std::fabs(pa[i]))) << i;
      moved += std::fabs(pc[i] - pa[i]);
    }
    EXPECT_GT(moved, 0.0);  // the residual's codes were read
  }
  set_num_threads(1);
}

// chain_int8 leaves float32 what int8 convs read on different scales, and a value a conv
// reads twice (as its input and its residual).
TEST(QuantConv, ChainPassSkipsMixedScalesAndDoubleReads) {
  const std::string text = R"(graph(%x: f32[2, 16, 12, 12], %w0: u8[24, 20], %w1: u8[24, 28]) {
  %a: f32[2, 24, 12, 12] = conv2d(%x, %w0, %w0) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.05]}
  %b: f32[2, 24, 12, 12] = conv2d(%a, %w1, %w1) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.1]}
  %c: f32[2, 24, 12, 12] = conv2d(%a, %w1, %w1) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.2]}
  %d: f32[2, 24, 12, 12] = conv2d(%b, %w1, %w1) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.1]}
  %e: f32[2, 24, 12, 12] = conv2d(%d, %w1, %w1, %d) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], kernel=[1, 1], x_scale=f[0.1], has_residual=[1]}
  return (%c, %e)
})";
  Graph g = parse_graph(text);
  EXPECT_EQ(layout_nchwc(g), 5);
  dead_code_elimination(g);
  EXPECT_EQ(chain_int8(g), 1);  // only %b into %d
  verify(g);
  for (const Node& n : g.nodes)
    if (n.op == Op::conv2d_nchwc) {
      const bool b = g.type(n.inputs[0]).dtype == DType::f32 && n.has("y_scale");
      EXPECT_EQ(g.type(n.outputs.back()).dtype == DType::u8, b) << print_graph(g);
    }
}

TEST(QuantConv, InferenceRejectsBadInt8Convs) {
  auto infer = [](const std::string& body, const std::string& w = "u8[8, 40]") {
    parse_graph("graph(%x: f32[1, 4, 6, 6], %w: " + w + ", %b: f32[8]) {\n  %y: f32[1, 8, 4, 4] = conv2d(%x, %w, %b) {" +
                "stride=[1, 1], padding=[0, 0], dilation=[1, 1], " + body + "}\n  return (%y)\n}");
  };
  EXPECT_NO_THROW(infer("kernel=[3, 3], has_bias=[1]"));
  EXPECT_NO_THROW(infer("kernel=[3, 3], has_bias=[1], x_scale=f[0.5]"));
  EXPECT_THROW(infer("has_bias=[1]"), Error);                           // no kernel
  EXPECT_THROW(infer("kernel=[3, 2], has_bias=[1]"), Error);            // 4 x 3 x 2 + 4 != 40 bytes
  EXPECT_THROW(infer("kernel=[3, 3], groups=[2], has_bias=[1]"), Error);  // grouped
  EXPECT_THROW(infer("kernel=[3, 3], has_bias=[1], x_scale=f[0]"), Error);
  EXPECT_THROW(infer("kernel=[3, 3], has_bias=[1], x_scale=f[-1]"), Error);
  EXPECT_THROW(infer("x_scale=f[0.5], has_bias=[1]", "f32[8, 4, 3, 3]"), Error);  // x_scale on float filters
  EXPECT_THROW(infer("kernel=[3, 3], has_bias=[1]", "u8[8, 4, 3, 3]"), Error);  // not rows
  // conv2d_nchwc with int8 rows: over 20 channels in blocks of 16 (2 blocks), 3x3
  auto blocked = [](const std::string& x, const std::string& body, const std::string& w = "u8[8, 184]") {
    parse_graph("graph(%x: " + x + ", %w: " + w + ", %b: f32[8]) {\n  %y: f32[1, 1, 4, 4, 16] = conv2d_nchwc(%x, %w, " +
                "%b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], " + body + "}\n  return (%y)\n}");
  };
  EXPECT_NO_THROW(blocked("f32[1, 2, 6, 6, 16]", "kernel=[3, 3], x_scale=f[0.5]"));
  EXPECT_THROW(blocked("f32[1, 2, 6, 6, 16]", "x_scale=f[0.5]"), Error);                    // no kernel
  EXPECT_THROW(blocked("f32[1, 2, 6, 6, 16]", "kernel=[3, 3], x_scale=f[0]"), Error);       // a zero scale
  EXPECT_THROW(blocked("f32[1, 2, 6, 6, 16]", "kernel=[3, 3], x_scale=f[1e-40]"), Error);   // 1 / scale overflows
  EXPECT_THROW(blocked("f32[1, 2, 6, 6, 16]", "kernel=[3, 3], groups=[2]"), Error);         // grouped
  EXPECT_NO_THROW(blocked("f32[1, 20, 6, 6]", "kernel=[3, 3], block=[16]"));               // an NCHW input (a stem)
  EXPECT_THROW(blocked("f32[1, 20, 6, 6]", "kernel=[3, 3]"), Error);                        // NCHW without `block`
  EXPECT_THROW(blocked("f32[1, 19, 6, 6]", "kernel=[3, 3], block=[16]"), Error);            // 19 channels, rows of 20
  EXPECT_THROW(blocked("f32[1, 1, 6, 6, 16]", "kernel=[3, 3]"), Error);                     // 20 channels, 1 block
  EXPECT_THROW(blocked("f32[1, 2, 6, 6, 16]", "kernel=[3, 3]", "u8[8, 183]"), Error);       // rows not 4 + C * 9
  EXPECT_THROW(blocked("f32[1, 2, 6, 6, 16]", "kernel=[1, 1]", "u8[8, 4]"), Error);         // no channels
  // codes in ([N, H, W, C], with x_scale and `block`) and out (y_scale)
  auto codes = [](const std::string& x, const std::string& y, const std::string& body,
                  const std::string& w = "u8[8, 184]") {
    parse_graph("graph(%x: " + x + ", %w: " + w + ", %b: f32[8]) {\n  %y: " + y + " = conv2d_nchwc(%x, %w, " +
                "%b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], " + body + "}\n  return (%y)\n}");
  };
  EXPECT_NO_THROW(codes("u8[1, 6, 6, 20]", "f32[1, 1, 4, 4, 16]", "kernel=[3, 3], x_scale=f[0.5], block=[16]"));
  EXPECT_NO_THROW(codes("u8[1, 6, 6, 20]", "u8[1, 4, 4, 8]", "kernel=[3, 3], x_scale=f[0.5], block=[16], y_scale=f[0.1]"));
  EXPECT_NO_THROW(codes("f32[1, 2, 6, 6, 16]", "u8[1, 4, 4, 8]", "kernel=[3, 3], y_scale=f[0.1]"));
  EXPECT_THROW(codes("u8[1, 6, 6, 20]", "f32[1, 1, 4, 4, 16]", "kernel=[3, 3], block=[16]"), Error);  // no x_scale
  EXPECT_THROW(codes("u8[1, 6, 6, 20]", "f32[1, 1, 4, 4, 16]", "kernel=[3, 3], x_scale=f[0.5]"), Error);  // no block
  EXPECT_THROW(codes("u8[1, 6, 6, 19]", "f32[1, 1, 4, 4, 16]", "kernel=[3, 3], x_scale=f[0.5], block=[16]"),
               Error);  // 19 channels, the weight's 20
  EXPECT_THROW(codes("f32[1, 2, 6, 6, 16]", "u8[1, 4, 4, 8]", "kernel=[3, 3], y_scale=f[0]"), Error);
  EXPECT_THROW(codes("f32[1, 2, 6, 6, 16]", "u8[1, 4, 4, 8]", "kernel=[3, 3], y_scale=f[1e-40]"), Error);
  EXPECT_THROW(codes("f32[1, 2, 6, 6, 16]", "u8[1, 4, 4, 8]", "y_scale=f[0.1]", "f32[8, 20, 3, 3]"), Error);  // float
  EXPECT_THROW(codes("u8[1, 2, 6, 6, 16]", "f32[1, 1, 4, 4, 16]", "kernel=[3, 3], x_scale=f[0.5]"), Error);  // u8 blocked
  // the residual as codes [N, OH, OW, OC] with r_scale
  auto rcodes = [](const std::string& r, const std::string& body) {
    parse_graph("graph(%x: f32[1, 2, 6, 6, 16], %w: u8[8, 184], %b: f32[8], %r: " + r + ") {\n  %y: f32[1, 1, 4, 4, 16] "
                "= conv2d_nchwc(%x, %w, %b, %r) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], "
                "has_residual=[1], kernel=[3, 3], " + body + "}\n  return (%y)\n}");
  };
  EXPECT_NO_THROW(rcodes("u8[1, 4, 4, 8]", "r_scale=f[0.1]"));
  EXPECT_NO_THROW(rcodes("f32[1, 1, 4, 4, 16]", "x_scale=f[0.1]"));
  EXPECT_THROW(rcodes("u8[1, 4, 4, 8]", "x_scale=f[0.1]"), Error);       // codes without r_scale
  EXPECT_THROW(rcodes("f32[1, 1, 4, 4, 16]", "r_scale=f[0.1]"), Error);  // r_scale, a float residual
  EXPECT_THROW(rcodes("u8[1, 4, 4, 7]", "r_scale=f[0.1]"), Error);       // not the output's channels
  EXPECT_THROW(rcodes("u8[1, 4, 4, 8]", "r_scale=f[-1]"), Error);
  EXPECT_THROW(parse_graph(R"(graph(%x: u8[1, 6, 6, 4]) {
  %y: u8[1, 6, 6, 4] = relu(%x)
  return (%y)
})"), Error);  // codes anywhere else
  EXPECT_THROW(parse_graph(R"(graph(%x: f32[1, 0, 6, 6], %w: u8[8, 4], %b: f32[8]) {
  %y: f32[1, 8, 6, 6] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[1], kernel=[1, 1]}
  return (%y)
})"), Error);  // an int8 conv over 0 channels (its GEMM would have no K)
}
