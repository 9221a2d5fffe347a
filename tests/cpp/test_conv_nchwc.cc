// The blocked channel layout (conv2d_nchwc.cc): the reorders both ways, the direct conv
// against a plain NCHW convolution in the test and against ref_conv2d_nchwc (odd channel
// counts, strides, padding, dilation, taps, batches, every epilogue), and the ops run
// through the runtime against conv2d; and the layout_nchwc pass.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/kernels.h"
#include "zenith/passes/passes.h"
#include "zenith/runtime.h"
#include "zenith/threadpool.h"

using namespace zenith;

namespace {
// Puts the kernels back on one thread when a test that set more leaves, passing or not.
struct ThreadsReset {
  ~ThreadsReset() { set_num_threads(1); }
};

// act(conv(x, w) * scale + shift + res), NCHW, in double; g.groups 1 or C (depthwise).
std::vector<float> plain_conv(const NchwcConvGeom& g, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& scale, const std::vector<float>& shift, const float* res,
                              Activation act) {
  std::vector<float> out(size_t(g.N * g.OC * g.OH * g.OW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t oc = 0; oc < g.OC; ++oc)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double s = 0;
          const int64_t cg = g.C / g.groups, c0 = oc / (g.OC / g.groups) * cg;  // oc's group's channels
          for (int64_t c = c0; c < c0 + cg; ++c)
            for (int64_t kh = 0; kh < g.KH; ++kh)
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                int64_t ih = oh * g.st[0] - g.pd[0] + kh * g.dl[0], iw = ow * g.st[1] - g.pd[1] + kw * g.dl[1];
                if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
                  s += double(x[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)]) *
                       w[size_t(((oc * cg + c - c0) * g.KH + kh) * g.KW + kw)];
              }
          const size_t at = size_t(((n * g.OC + oc) * g.OH + oh) * g.OW + ow);
          float y = float(s) * scale[size_t(oc)] + shift[size_t(oc)] + (res ? res[at] : 0.0f);
          with_activation(act, [&](auto f) { y = f(y); });
          out[at] = y;
        }
  return out;
}

std::vector<float> blocked(const std::vector<float>& x, int64_t N, int64_t C, int64_t HW, int64_t L) {
  std::vector<float> b(size_t(N * ((C + L - 1) / L) * L * HW), -7.0f);  // every value written
  nchw_to_nchwc(x.data(), N, C, HW, L, b.data());
  return b;
}

// A blocked conv's output `ob` against the NCHW answer `want` and the blocked reference
// `rf`, within tol (relative, plus as much absolute); the padding channels zero in it.
void expect_blocked_output(const NchwcConvGeom& g, const std::vector<float>& ob, const std::vector<float>& rf,
                           const std::vector<float>& want, float tol, const std::string& what) {
  const int64_t L = g.L, OCB = (g.OC + L - 1) / L, OP = g.OH * g.OW;
  std::vector<float> got(want.size(), NAN);
  nchwc_to_nchw(ob.data(), g.N, g.OC, OP, L, got.data());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
  for (size_t i = 0; i < ob.size(); ++i) {  // the padding channels too: zero in both
    ASSERT_NEAR(ob[i], rf[i], tol * (1 + std::fabs(rf[i]))) << what << " blocked value " << i;
    if (int64_t(i / size_t(OP * L)) % OCB == OCB - 1 && int64_t(i % size_t(L)) >= g.OC - (OCB - 1) * L)
      ASSERT_EQ(ob[i], 0.0f) << what << " padding channel value " << i;
  }
}
}  // namespace

TEST(Kernels, NchwcReordersRoundTripAndZeroThePadding) {
  EXPECT_TRUE(nchwc_block() == 8 || nchwc_block() == 16);
  for (int64_t L : {8, 16})
    for (int64_t N : {1, 3})
      for (int64_t C : {1, 5, 8, 16, 17, 40})
        for (int64_t HW : {1, 7, 30}) {
          auto x = randn(size_t(N * C * HW), unsigned(C * HW + N));
          auto b = blocked(x, N, C, HW, L);
          const int64_t CB = (C + L - 1) / L;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t c = 0; c < CB * L; ++c)
              for (int64_t p = 0; p < HW; ++p) {
                float want = c < C ? x[size_t((n * C + c) * HW + p)] : 0.0f;
                ASSERT_EQ(b[size_t(((n * CB + c / L) * HW + p) * L + c % L)], want) << L << " " << C << " " << c;
              }
          std::vector<float> back(x.size(), -7.0f);
          nchwc_to_nchw(b.data(), N, C, HW, L, back.data());
          ASSERT_EQ(back, x) << "L " << L << " C " << C;
        }
}

TEST(Kernels, NchwcConvMatchesPlainConvOverOddShapesAndEpilogues) {
  struct Case {
    int64_t N, C, H, W, OC, KH, KW, s, p, d;
    int64_t sw = 0, pw = 0, dw = 0;  // the width's stride, padding and dilation where they differ (0: the same)
  };
  const Case cases[] = {
      {1, 3, 9, 7, 5, 3, 3, 1, 1, 1},   {2, 17, 6, 5, 40, 1, 1, 1, 0, 1},  {1, 16, 8, 8, 33, 3, 3, 2, 1, 1},
      {1, 8, 11, 9, 16, 5, 3, 1, 2, 1}, {2, 40, 7, 7, 64, 1, 1, 2, 0, 1},  {1, 9, 10, 10, 17, 3, 3, 1, 2, 2},
      {1, 32, 14, 14, 48, 3, 3, 1, 1, 1}, {1, 24, 13, 13, 8, 7, 7, 2, 3, 1}, {3, 4, 1, 1, 20, 1, 1, 1, 0, 1},
      {1, 6, 2, 3, 7, 3, 3, 1, 1, 1},
      // stride-1 1x1 convs (the run kernel over the input in place): small filters on a map
      // larger than a run of tiles (several runs per image), large filters (groups split
      // between threads in one image, prefetched), fewer channels than a block, a lone
      // block of output channels, two images of unequal sides with a dilation (which a
      // 1x1 conv ignores)
      {1, 64, 80, 80, 20, 1, 1, 1, 0, 1}, {1, 40, 7, 7, 64, 1, 1, 1, 0, 1}, {1, 5, 9, 9, 12, 1, 1, 1, 0, 1},
      {2, 24, 13, 11, 8, 1, 1, 1, 0, 2},
      // strided 1x1 convs (their runs' pixels copied together first): several runs, odd
      // channels, a column stride other than the rows', groups split between threads in
      // one image (a thread's first item mid-image), a lone 16-channel block, fewer
      // channels than a block, a stride in one dimension and one column, and with padding
      // (the generic tile)
      {2, 64, 100, 100, 20, 1, 1, 2, 0, 1}, {1, 20, 30, 41, 24, 1, 1, 2, 0, 1, 3, 0, 0},
      {1, 40, 7, 7, 64, 1, 1, 2, 0, 1},     {1, 5, 9, 9, 12, 1, 1, 2, 0, 1},
      {1, 16, 9, 1, 12, 1, 1, 2, 0, 1, 1, 0, 0}, {1, 16, 9, 9, 12, 1, 1, 2, 1, 1},
      // strided convs wider than 1x1 (8-channel blocks: the run kernel over their runs'
      // patches; 16: the generic tile in place): several
      // runs of an image, filters larger than the image (one run; groups split between
      // threads within an image at 3 threads, prefetched), a dilation with padding wider
      // than the taps' reach (border pixels whose every tap is padding), a stride in one
      // dimension only, odd channels
      {1, 32, 80, 80, 24, 3, 3, 2, 1, 1}, {2, 64, 9, 9, 64, 3, 3, 2, 1, 1}, {1, 20, 15, 15, 12, 3, 3, 2, 5, 2},
      {1, 13, 10, 12, 17, 3, 3, 1, 1, 1, 2, 1, 1},
      // stems: rows wide enough for the NCHW input's row tiles (strides 1 and 2, dilation)
      {1, 3, 30, 61, 20, 3, 3, 2, 1, 1}, {2, 3, 20, 40, 16, 3, 3, 1, 2, 2}, {1, 3, 33, 47, 40, 7, 7, 2, 3, 1},
      // rows and columns differing in stride, padding and dilation (the row tile's column
      // stride 1 under a row stride 2, and a column stride 3, which no row tile takes)
      {1, 3, 31, 45, 24, 3, 5, 2, 1, 1, 1, 2, 1}, {1, 3, 26, 50, 16, 3, 3, 1, 0, 2, 3, 1, 1},
      {2, 11, 12, 17, 19, 3, 3, 1, 2, 2, 2, 1, 1},
  };
  const Activation acts[] = {Activation::kNone, Activation::kRelu, Activation::kRelu6, Activation::kGelu,
                             Activation::kSilu};
  unsigned seed = 1;
  int ci = 0;
  // nchw_in: the input NCHW as it is (a stem's image), the output blocked. Two or three
  // threads take items (image, run, group) in contiguous shares, so a thread may start
  // mid-image.
  const ThreadsReset reset;
  for (int threads : {1, 2, 3})
  for (bool nchw_in : {false, true})
  for (const Case& k : cases)
    for (int64_t L : {8, 16}) {
      set_num_threads(threads);
      NchwcConvGeom g;
      g.N = k.N, g.C = k.C, g.H = k.H, g.W = k.W, g.OC = k.OC, g.KH = k.KH, g.KW = k.KW, g.L = L;
      g.nchw_in = nchw_in;
      const int64_t s_w = k.sw ? k.sw : k.s, p_w = k.pw ? k.pw : k.p, d_w = k.dw ? k.dw : k.d;
      g.st = {k.s, s_w}, g.pd = {k.p, p_w}, g.dl = {k.d, d_w};
      g.OH = (k.H + 2 * k.p - k.d * (k.KH - 1) - 1) / k.s + 1;
      g.OW = (k.W + 2 * p_w - d_w * (k.KW - 1) - 1) / s_w + 1;
      const int64_t OCB = (k.OC + L - 1) / L, OP = g.OH * g.OW;
      auto x = randn(size_t(k.N * k.C * k.H * k.W), seed++), w = randn(size_t(k.OC * k.C * k.KH * k.KW), seed++);
      auto scale = randn(size_t(k.OC), seed++), shift = randn(size_t(k.OC), seed++);
      auto res = randn(size_t(k.N * k.OC * OP), seed++);
      const Activation act = acts[ci++ % 5];
      const bool with_res = ci / 2 % 2 == 0;  // each block size with and without, case after case
      auto want = plain_conv(g, x, w, scale, shift, with_res ? res.data() : nullptr, act);
      auto xb = nchw_in ? x : blocked(x, k.N, k.C, k.H * k.W, L), rb = blocked(res, k.N, k.OC, OP, L);
      const PackedOperand pw = conv2d_nchwc_pack(g, w.data());
      std::vector<float> ob(size_t(k.N * OCB * L * OP), NAN), rf(ob.size(), NAN);
      conv2d_nchwc(g, xb.data(), pw, scale.data(), shift.data(), with_res ? rb.data() : nullptr, act, ob.data());
      ref_conv2d_nchwc(g, xb.data(), w.data(), scale.data(), shift.data(), with_res ? rb.data() : nullptr, act,
                       rf.data());
      // Float sums in another order than the double references': a few ulp per term.
      expect_blocked_output(g, ob, rf, want, 1e-5f * std::sqrt(float(k.C * k.KH * k.KW)),
                            "case " + std::to_string(ci) + " L " + std::to_string(L) + (nchw_in ? " nchw_in" : "") +
                                " threads " + std::to_string(threads));
    }
}

// A strided 3x3 conv whose filters outweigh its image (one run per image) and whose run's
// patches would pass conv2d_nchwc's bound for copying them (4 MiB: 256 output pixels of
// 512 channels x 9 taps) runs the generic strided tile instead (with 16-channel blocks
// every strided 3x3 conv does): against eager's answer and the blocked reference.
TEST(Kernels, NchwcStridedConvOverLargePatchesRunsTheTile) {
  const ThreadsReset reset;
  set_num_threads(2);
  for (int64_t L : {8, 16}) {
    NchwcConvGeom g;
    g.N = 1, g.C = 512, g.H = g.W = 32, g.OC = 120, g.OH = g.OW = 16, g.KH = g.KW = 3, g.L = L;
    g.st = {2, 2}, g.pd = {1, 1};
    auto x = randn(size_t(g.C * g.H * g.W), 41), w = randn(size_t(g.OC * g.C * 9), 42);
    auto scale = randn(size_t(g.OC), 43), shift = randn(size_t(g.OC), 44);
    auto want = plain_conv(g, x, w, scale, shift, nullptr, Activation::kRelu);
    auto xb = blocked(x, 1, g.C, g.H * g.W, L);
    const int64_t OCB = (g.OC + L - 1) / L;
    std::vector<float> ob(size_t(OCB * L * g.OH * g.OW), NAN), rf(ob.size(), NAN);
    conv2d_nchwc(g, xb.data(), conv2d_nchwc_pack(g, w.data()), scale.data(), shift.data(), nullptr, Activation::kRelu,
                 ob.data());
    ref_conv2d_nchwc(g, xb.data(), w.data(), scale.data(), shift.data(), nullptr, Activation::kRelu, rf.data());
    expect_blocked_output(g, ob, rf, want, 1e-5f * std::sqrt(float(g.C * 9)), "L " + std::to_string(L));
  }
}

TEST(Kernels, NchwcConvRejectsForeignFiltersAndBadBlocks) {
  NchwcConvGeom g;
  g.N = 1, g.C = 8, g.H = g.W = g.OH = g.OW = 4, g.OC = 8, g.KH = g.KW = 1, g.L = 8;
  auto w = randn(64, 1), x = randn(128, 2);
  std::vector<float> out(128);
  PackedOperand pw = conv2d_nchwc_pack(g, w.data());
  NchwcConvGeom other = g;
  other.OC = 16;
  EXPECT_THROW(conv2d_nchwc(other, x.data(), pw, nullptr, nullptr, nullptr, Activation::kNone, out.data()), Error);
  other = g;
  other.L = 4;
  EXPECT_THROW(conv2d_nchwc_pack(other, w.data()), Error);
  other = g;  // filters packed for a blocked input do not serve an NCHW one (their rows differ)
  other.nchw_in = true;
  EXPECT_THROW(conv2d_nchwc(other, x.data(), pw, nullptr, nullptr, nullptr, Activation::kNone, out.data()), Error);
  other.groups = other.C = other.OC;  // nor is a depthwise conv over an NCHW input one
  EXPECT_THROW(depthwise_nchwc_pack(other, w.data()), Error);
  other.nchw_in = false;  // (the same depthwise geometry over a blocked input packs)
  EXPECT_NO_THROW(depthwise_nchwc_pack(other, w.data()));
  for (int64_t* d : {&other.OH, &other.OW}) {  // an output map the conv does not make (smaller: no read past x)
    other = g;
    *d = 3;
    EXPECT_THROW(conv2d_nchwc(other, x.data(), pw, nullptr, nullptr, nullptr, Activation::kNone, out.data()), Error);
  }
  // No output: a 3x3 conv over a 2x2 map without padding, at strides 1 and 2, or no
  // images, writes nothing and does not fail (the conv returns before choosing a kernel;
  // it once cut runs of 0 tiles). A 1x1 conv over an empty map below.
  for (int64_t C : {8, 512})
    for (int64_t stride : {1, 2}) {
      NchwcConvGeom e;
      e.N = 1, e.C = C, e.H = e.W = 2, e.OC = 16, e.KH = e.KW = 3, e.OH = e.OW = 0, e.L = 8, e.st = {stride, stride};
      auto we = randn(size_t(e.OC * e.C * 9), 3), xe = randn(size_t(e.C * 4), 4);
      const PackedOperand pe = conv2d_nchwc_pack(e, we.data());
      std::vector<float> guard(16, 7.0f);
      EXPECT_NO_THROW(conv2d_nchwc(e, xe.data(), pe, nullptr, nullptr, nullptr, Activation::kRelu, guard.data()));
      NchwcConvGeom one = e;  // (at stride 2 a 1 x 1 map once passed the check: -1 / 2 rounded to 0)
      one.OH = one.OW = 1;
      EXPECT_THROW(conv2d_nchwc(one, xe.data(), pe, nullptr, nullptr, nullptr, Activation::kRelu, guard.data()), Error);
      e.N = 0, e.H = e.W = e.OH = e.OW = 4, e.pd = {1, 1}, e.st = {1, 1};
      EXPECT_NO_THROW(conv2d_nchwc(e, xe.data(), pe, nullptr, nullptr, nullptr, Activation::kRelu, guard.data()));
      EXPECT_EQ(guard, std::vector<float>(16, 7.0f));
    }
  for (int64_t L : {8, 16}) {
    NchwcConvGeom e;
    e.N = 2, e.C = 24, e.H = e.W = e.OH = e.OW = 0, e.OC = 40, e.KH = e.KW = 1, e.L = L;
    auto we = randn(size_t(e.OC * e.C), 5);
    std::vector<float> guard(16, 7.0f);
    EXPECT_NO_THROW(conv2d_nchwc(e, nullptr, conv2d_nchwc_pack(e, we.data()), nullptr, nullptr, nullptr,
                                 Activation::kRelu, guard.data()));
    EXPECT_EQ(guard, std::vector<float>(16, 7.0f));
  }
}

// to_nchwc -> conv2d_nchwc (+ bn, residual, ReLU) -> from_nchwc through the runtime, against
// conv2d on the same inputs.
TEST(Runtime, NchwcOpsMatchConv2d) {
  for (int64_t L : {8, 16}) {
    const std::string l = std::to_string(L), cb_in = std::to_string((10 + L - 1) / L),
                      cb_out = std::to_string((12 + L - 1) / L);
    const std::string blocked_text = R"(graph(%x: f32[2, 10, 9, 9], %w: f32[12, 10, 3, 3], %b: f32[12], %g: f32[12], %h: f32[12], %m: f32[12], %v: f32[12], %r: f32[2, 12, 5, 5]) {
  %xb: f32[2, )" + cb_in + ", 9, 9, " + l + "] = to_nchwc(%x) {block=[" + l + R"(]}
  %rb: f32[2, )" + cb_out + ", 5, 5, " + l + "] = to_nchwc(%r) {block=[" + l + R"(]}
  %cb: f32[2, )" + cb_out + ", 5, 5, " + l + R"(] = conv2d_nchwc(%xb, %w, %b, %g, %h, %m, %v, %rb) {stride=[2, 2], padding=[1, 1], dilation=[1, 1], has_bias=[1], bn_eps=f[0.001], has_residual=[1], activation=[1]}
  %c: f32[2, 12, 5, 5] = from_nchwc(%cb) {channels=[12]}
  return (%c)
})";
    const std::string plain_text = R"(graph(%x: f32[2, 10, 9, 9], %w: f32[12, 10, 3, 3], %b: f32[12], %g: f32[12], %h: f32[12], %m: f32[12], %v: f32[12], %r: f32[2, 12, 5, 5]) {
  %c: f32[2, 12, 5, 5] = conv2d(%x, %w, %b, %g, %h, %m, %v, %r) {stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1], bn_eps=f[0.001], has_residual=[1], activation=[1]}
  return (%c)
})";
    Executable blocked_exe(parse_graph(blocked_text)), plain_exe(parse_graph(plain_text));
    auto x = randn(2 * 10 * 81, 3), w = randn(12 * 10 * 9, 4), b = randn(12, 5), gm = randn(12, 6), bt = randn(12, 7),
         m = randn(12, 8), v = randn(12, 9), r = randn(2 * 12 * 25, 10);
    for (auto& e : v) e = std::fabs(e) + 0.5f;
    std::vector<InTensor> ins = {{x.data(), DType::f32, {2, 10, 9, 9}}, {w.data(), DType::f32, {12, 10, 3, 3}},
                                 {b.data(), DType::f32, {12}},          {gm.data(), DType::f32, {12}},
                                 {bt.data(), DType::f32, {12}},         {m.data(), DType::f32, {12}},
                                 {v.data(), DType::f32, {12}},          {r.data(), DType::f32, {2, 12, 5, 5}}};
    auto got = blocked_exe.run(ins, {}), want = plain_exe.run(ins, {});
    const float* pg = static_cast<const float*>(got[0].data);
    const float* pw = static_cast<const float*>(want[0].data);
    for (int i = 0; i < 2 * 12 * 25; ++i) ASSERT_NEAR(pg[i], pw[i], 1e-4f * (1 + std::fabs(pw[i]))) << "L " << L << " " << i;
    // The same conv reading x as NCHW (`block`, as a stem does): no to_nchwc of x.
    std::string stem_text = blocked_text;
    stem_text.replace(stem_text.find("  %xb"), stem_text.find("  %rb") - stem_text.find("  %xb"), "");
    stem_text.replace(stem_text.find("(%xb,"), 5, "(%x,");
    stem_text.replace(stem_text.find("activation=[1]}"), 15, "activation=[1], block=[" + l + "]}");
    Executable stem_exe(parse_graph(stem_text));
    auto got_stem = stem_exe.run(ins, {});
    const float* ps = static_cast<const float*>(got_stem[0].data);
    for (int i = 0; i < 2 * 12 * 25; ++i) ASSERT_NEAR(ps[i], pw[i], 1e-4f * (1 + std::fabs(pw[i]))) << "L " << L << " " << i;
  }
}

// A NaN or an infinity in a Winograd conv's input reaches the outputs whose windows read
// it, as in the direct conv and eager, and an infinity stays one: the ops run such images
// by the direct conv (Winograd's transforms would spread it over its tile, inf - inf
// NaN). Both layouts (conv2d's Winograd per image, conv2d_nchwc's for F(4x4) with blocks of 8 and
// F(2x2) with blocks of 16 at this size), images clean and not in runs of one and two,
// against the double reference; the clean images within Winograd's rounding.
TEST(Runtime, WinogradConvsKeepNanAndInfinityToTheirWindows) {
  ThreadsReset reset;
  set_num_threads(2);
  constexpr int64_t N = 5, C = 64, HW = 8, P = HW * HW;
  std::vector<float> x = randn(size_t(N * C * P), 21), w = randn(size_t(C * C * 9), 22, 0.05f),
                     b = randn(size_t(C), 23), r = randn(size_t(N * C * P), 24);
  const auto at = [&](int64_t n, int64_t c, int64_t h, int64_t ww) { return size_t(((n * C + c) * HW + h) * HW + ww); };
  x[at(1, 3, 2, 5)] = NAN;                                              // image 1: a NaN
  x[at(2, 7, 0, 0)] = INFINITY, x[at(2, 9, 6, 1)] = -INFINITY;          // image 2: both infinities, apart
  x[at(4, 0, 7, 7)] = INFINITY, x[at(4, 0, 7, 6)] = INFINITY;           // image 4: two together
  const std::vector<uint8_t> bad = {0, 1, 1, 0, 1};
  EXPECT_EQ(nonfinite_images(x.data(), N, C * P), bad);
  NchwcConvGeom g;
  g.N = N, g.C = g.OC = C, g.H = g.W = g.OH = g.OW = HW, g.KH = g.KW = 3, g.pd = {1, 1};
  const std::vector<float> ones(size_t(C), 1.0f);
  const auto want = plain_conv(g, x, w, ones, b, r.data(), Activation::kRelu);
  const std::string sh = "[5, 64, 8, 8]", epi = "has_bias=[1], has_residual=[1], activation=[1]";
  std::vector<std::string> texts = {"graph(%x: f32" + sh + ", %w: f32[64, 64, 3, 3], %b: f32[64], %r: f32" + sh +
                                    ") {\n  %c: f32" + sh + " = conv2d(%x, %w, %b, %r) {stride=[1, 1], "
                                    "padding=[1, 1], dilation=[1, 1], groups=[1], " + epi + "}\n  return (%c)\n})"};
  for (int64_t L : {8, 16}) {
    const std::string bs = "[5, " + std::to_string(C / L) + ", 8, 8, " + std::to_string(L) + "]";
    texts.push_back("graph(%x: f32" + sh + ", %w: f32[64, 64, 3, 3], %b: f32[64], %r: f32" + sh + ") {\n"
                    "  %xb: f32" + bs + " = to_nchwc(%x) {block=[" + std::to_string(L) + "]}\n"
                    "  %rb: f32" + bs + " = to_nchwc(%r) {block=[" + std::to_string(L) + "]}\n"
                    "  %cb: f32" + bs + " = conv2d_nchwc(%xb, %w, %b, %rb) {stride=[1, 1], padding=[1, 1], "
                    "dilation=[1, 1], " + epi + "}\n"
                    "  %c: f32" + sh + " = from_nchwc(%cb) {channels=[64]}\n  return (%c)\n})");
  }
  std::vector<InTensor> ins = {{x.data(), DType::f32, {N, C, HW, HW}}, {w.data(), DType::f32, {C, C, 3, 3}},
                               {b.data(), DType::f32, {C}}, {r.data(), DType::f32, {N, C, HW, HW}}};
  for (const std::string& text : texts) {
    Executable exe(parse_graph(text));
    auto got = exe.run(ins, {});
    const float* pg = static_cast<const float*>(got[0].data);
    int64_t nonfinite = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const std::string where = text.substr(text.find(") {") + 4, 40) + " output " + std::to_string(i);
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(pg[i])) << where << " is " << pg[i];
        ++nonfinite;
      } else if (std::isinf(want[i])) {
        ASSERT_EQ(pg[i], want[i]) << where;
        ++nonfinite;
      } else {
        ASSERT_NEAR(pg[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << where;
      }
    }
    EXPECT_GT(nonfinite, 3 * C) << "the non-finite inputs reach outputs";
  }
  EXPECT_EQ(ref_nonfinite_images(x.data(), N, C * P), bad);
  // An infinity in the filters (one tap of one channel pair): Winograd's filter transform
  // would spread it over the tile; every image runs by the direct conv, as packed
  // (constant weights) and not. Inputs all finite here.
  std::vector<float> xf = randn(size_t(N * C * P), 25), wi = w;
  wi[size_t((5 * C + 7) * 9 + 4)] = INFINITY;  // output channel 5, input 7, the centre tap
  const auto want_w = plain_conv(g, xf, wi, ones, b, r.data(), Activation::kRelu);
  std::vector<InTensor> ins_w = {{xf.data(), DType::f32, {N, C, HW, HW}}, {wi.data(), DType::f32, {C, C, 3, 3}},
                                 {b.data(), DType::f32, {C}}, {r.data(), DType::f32, {N, C, HW, HW}}};
  for (const std::string& text : texts)
    for (bool constant : {false, true}) {
      Executable exe(parse_graph(text));
      if (constant) exe.set_constant_inputs({1});
      auto got = exe.run(ins_w, {});
      const float* pg = static_cast<const float*>(got[0].data);
      for (size_t i = 0; i < want_w.size(); ++i) {
        const std::string where = text.substr(text.find(") {") + 4, 40) + (constant ? " packed" : "") +
                                  " output " + std::to_string(i);
        if (std::isnan(want_w[i])) ASSERT_TRUE(std::isnan(pg[i])) << where << " is " << pg[i];
        else if (std::isinf(want_w[i])) ASSERT_EQ(pg[i], want_w[i]) << where;
        else ASSERT_NEAR(pg[i], want_w[i], 1e-4f * (1 + std::fabs(want_w[i]))) << where;
      }
    }
}

// nonfinite_images against ref_nonfinite_images: images shorter than a vector, with tails,
// across the scan's 16384-value pieces; NaN, both infinities, and finite extremes
// (largest, smallest normal and subnormal, -0) that must not count.
TEST(Kernels, NonfiniteImagesMatchesTheReference) {
  ThreadsReset reset;
  std::mt19937 rng(7);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t image : {int64_t(1), int64_t(7), int64_t(8), int64_t(13), int64_t(16384), int64_t(16389),
                          int64_t(40000)})
      for (int64_t N : {int64_t(1), int64_t(3)}) {
        std::vector<float> x = randn(size_t(N * image), unsigned(image + N));
        const float finite[] = {3.4028235e38f, -3.4028235e38f, 1.17549435e-38f, 1.4e-45f, -0.0f};
        for (float f : finite) x[rng() % x.size()] = f;
        EXPECT_EQ(nonfinite_images(x.data(), N, image), std::vector<uint8_t>(size_t(N), 0)) << image;
        const float special[] = {NAN, INFINITY, -INFINITY};
        for (int trial = 0; trial < 12; ++trial) {
          std::vector<float> y = x;
          const int64_t n = int64_t(rng() % uint64_t(N));
          // the last value, a piece's first or last, or anywhere
          const int64_t cands[] = {image - 1, std::min<int64_t>(16384, image - 1), std::min<int64_t>(16383, image - 1),
                                   int64_t(rng() % uint64_t(image))};
          y[size_t(n * image + cands[trial % 4])] = special[trial % 3];
          const auto got = nonfinite_images(y.data(), N, image);
          EXPECT_EQ(got, ref_nonfinite_images(y.data(), N, image)) << image << " trial " << trial;
          EXPECT_EQ(got[size_t(n)], 1) << image << " trial " << trial;
        }
      }
  }
  EXPECT_TRUE(nonfinite_images(nullptr, 0, 10).empty());
  // With Winograd's limit: magnitudes over 2^100 count, up to it not.
  std::vector<float> y = randn(40000, 9);
  y[39999] = 0x1p100f, y[17] = -0x1p100f;
  EXPECT_EQ(nonfinite_images(y.data(), 2, 20000, kWinogradLimit), std::vector<uint8_t>({0, 0}));
  y[20001] = -0x1p101f;
  EXPECT_EQ(nonfinite_images(y.data(), 2, 20000, kWinogradLimit), std::vector<uint8_t>({0, 1}));
  EXPECT_EQ(ref_nonfinite_images(y.data(), 2, 20000, kWinogradLimit), std::vector<uint8_t>({0, 1}));
  EXPECT_EQ(nonfinite_images(y.data(), 2, 20000), std::vector<uint8_t>({0, 0}));
}

namespace {
// Runs a graph before and after a pass on the same random float32 inputs of these shapes
// (seeds 1, 2, ...) and holds every output of the second to the first's, outputs as many.
void expect_same_outputs(Graph before, Graph after, const std::vector<std::vector<int64_t>>& shapes,
                         size_t outputs) {
  std::vector<std::vector<float>> data;
  std::vector<InTensor> ins;
  for (size_t i = 0; i < shapes.size(); ++i) {
    size_t n = 1;
    for (int64_t d : shapes[i]) n *= size_t(d);
    data.push_back(randn(n, unsigned(i + 1)));
  }
  for (size_t i = 0; i < shapes.size(); ++i) ins.push_back({data[i].data(), DType::f32, shapes[i]});
  Executable a(std::move(before)), b(std::move(after));
  auto want = a.run(ins, {}), got = b.run(ins, {});
  ASSERT_EQ(got.size(), outputs);
  for (size_t o = 0; o < outputs; ++o) {
    int64_t n = 1;
    for (int64_t d : want[o].shape) n *= d;
    for (int64_t i = 0; i < n; ++i) {
      const float w = static_cast<const float*>(want[o].data)[i], v = static_cast<const float*>(got[o].data)[i];
      ASSERT_NEAR(v, w, 1e-3f * (1 + std::fabs(w))) << "output " << o << " at " << i;
    }
  }
}
}  // namespace

// layout_nchwc (on by default; ZENITH_NCHWC=0 off): a chain of convs passes
// blocked tensors (one to_nchwc, for x; the residual is a blocked conv's output; one
// from_nchwc out), and the graph computes what it did.
TEST(Passes, LayoutNchwcChainsBlockedConvs) {
  const char* text = R"(graph(%x: f32[2, 16, 9, 9], %w1: f32[24, 16, 3, 3], %w2: f32[32, 24, 1, 1], %w3: f32[32, 32, 3, 3], %wd: f32[32, 1, 3, 3], %b: f32[32]) {
  %a: f32[2, 24, 5, 5] = conv2d(%x, %w1, %w1) {stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[0], activation=[1]}
  %c: f32[2, 32, 5, 5] = conv2d(%a, %w2, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %d: f32[2, 32, 5, 5] = conv2d(%c, %w3, %b, %c) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1], has_residual=[1], activation=[1]}
  %e: f32[2, 32, 5, 5] = relu(%d)
  return (%e, %d)
})";
  Graph plain = parse_graph(text), g = parse_graph(text);
  ASSERT_EQ(setenv("ZENITH_NCHWC", "0", 1), 0);
  EXPECT_EQ(layout_nchwc(g), 0);  // turned off
  unsetenv("ZENITH_NCHWC");
  EXPECT_EQ(layout_nchwc(g), 3);  // on by default for a static batch of 2
  dead_code_elimination(g);
  verify(g);
  std::map<Op, int> ops;
  for (const Node& n : g.nodes) ++ops[n.op];
  EXPECT_EQ(ops[Op::to_nchwc], 1);    // x only: the residual %c is conv 2's blocked output
  EXPECT_EQ(ops[Op::conv2d_nchwc], 3);
  EXPECT_EQ(ops[Op::from_nchwc], 1);  // %d, read by relu and returned
  EXPECT_EQ(ops[Op::conv2d], 0);
  expect_same_outputs(std::move(plain), std::move(g),
                      {{2, 16, 9, 9}, {24, 16, 3, 3}, {32, 24, 1, 1}, {32, 32, 3, 3}, {32, 1, 3, 3}, {32}}, 2);
}

// conv3x3_winograd_nchwc against conv3x3_winograd on the same images in NCHW (for F(2x2)
// the same transforms and products, summed in another order; F(4x4)'s own rounding is
// larger) and against ref_conv2d_nchwc:
// odd maps (tiles past the edge), small filters (fused passes of tile rows: one or
// several per image) and large ones (passes of whole images: one or two per batch),
// every epilogue, blocks of 8 and 16; F(2x2) and F(4x4) tiles (4x4 tiles past the edge on
// maps of 1, 3, 5, 7, 9 and 14).
TEST(Kernels, NchwcWinogradMatchesNchwWinogradAndReference) {
  struct Case {
    int64_t N, C, OC, H, W;
  };
  const Case cases[] = {{3, 64, 80, 9, 7},     {2, 32, 48, 1, 1},     {2, 16, 32, 4, 5},
                        {1, 64, 64, 56, 56},   {2, 128, 144, 3, 5},   {10, 128, 144, 14, 14},
                        {2, 24, 40, 9, 7}};  // (24 channels: a part chunk of the packer's 16; 5 blocks of 8)
  for (int m : {2, 4})
  for (int64_t L : {8, 16})
    for (const Case& k : cases)
      for (int e = 0; e < 3; ++e) {
        if (k.C % L || k.OC % L) continue;
        const Activation act = e == 0 ? Activation::kRelu : e == 1 ? Activation::kNone : Activation::kGelu;
        const bool with_res = e != 1;
        NchwcConvGeom g;
        g.N = k.N, g.C = k.C, g.OC = k.OC, g.H = g.OH = k.H, g.W = g.OW = k.W, g.KH = g.KW = 3, g.L = L;
        g.pd = {1, 1};
        const int64_t HW = k.H * k.W;
        auto x = randn(size_t(k.N * k.C * HW), 11), w = randn(size_t(k.OC * k.C * 9), 12),
             r = randn(size_t(k.N * k.OC * HW), 13), scale = randn(size_t(k.OC), 14), shift = randn(size_t(k.OC), 15);
        std::vector<float> want(r.size());
        for (int64_t n = 0; n < k.N; ++n) {
          GemmEpilogue ep;
          ep.row_scale = scale.data();
          ep.row_shift = shift.data();
          ep.act = act;
          if (with_res) ep.residual = r.data() + n * k.OC * HW, ep.ld_residual = HW;
          conv3x3_winograd(x.data() + n * k.C * HW, k.C, k.H, k.W, w.data(), k.OC, want.data() + n * k.OC * HW, ep);
        }
        auto xb = blocked(x, k.N, k.C, HW, L), rb = blocked(r, k.N, k.OC, HW, L);
        PackedOperand u = conv3x3_winograd_nchwc_pack(g, w.data(), m);
        std::vector<float> got_b(rb.size(), -7.0f), got(want.size()), ref_b(rb.size());
        conv3x3_winograd_nchwc(g, xb.data(), u, scale.data(), shift.data(), with_res ? rb.data() : nullptr, act,
                               got_b.data());
        nchwc_to_nchw(got_b.data(), k.N, k.OC, HW, L, got.data());
        // F(4x4)'s transforms scale values by up to 8 and 1/24 on the way, so its rounding
        // is some 40x F(2x2)'s (worst seen 8e-4 on outputs of magnitude ~34).
        const float tol = (m == 4 ? 1.5e-4f : 2e-5f) * std::sqrt(float(k.C * 9));
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i])))
              << "F(" << m << "x" << m << ") L " << L << " C " << k.C << " map " << k.H << "x" << k.W << " epilogue " << e
              << " at " << i;
        if (k.H * k.W > 100) continue;  // the scalar reference is slow
        ref_conv2d_nchwc(g, xb.data(), w.data(), scale.data(), shift.data(), with_res ? rb.data() : nullptr, act,
                         ref_b.data());
        for (size_t i = 0; i < ref_b.size(); ++i)
          ASSERT_NEAR(got_b[i], ref_b[i], tol * (1 + std::fabs(ref_b[i])))
              << "F(" << m << "x" << m << ") L " << L << " reference at " << i;
      }
  NchwcConvGeom g;  // blocks must be whole, the conv 3x3 / stride 1 / padding 1
  g.N = 1, g.C = 40, g.OC = 64, g.H = g.OH = 7, g.W = g.OW = 7, g.KH = g.KW = 3, g.L = 16, g.pd = {1, 1};
  std::vector<float> w(64 * 48 * 9);  // room for the 48 channels packed below
  EXPECT_THROW(conv3x3_winograd_nchwc_pack(g, w.data()), Error);
  g.C = 48, g.pd = {0, 0}, g.OH = g.OW = 5;
  EXPECT_THROW(conv3x3_winograd_nchwc_pack(g, w.data()), Error);
  g.pd = {1, 1}, g.OH = g.OW = 7;
  PackedOperand u = conv3x3_winograd_nchwc_pack(g, w.data());
  g.L = 8;  // packed for blocks of 16
  std::vector<float> x(48 * 49), o(64 * 49);
  EXPECT_THROW(conv3x3_winograd_nchwc(g, x.data(), u, nullptr, nullptr, nullptr, Activation::kNone, o.data()), Error);
}

// A Winograd conv (3x3, 64 channels, an 8 x 8 map) joins the blocked chain on whole
// blocks: no conv2d and one conversion each way remain, and the results are unchanged.
TEST(Passes, LayoutNchwcRunsWinogradConvsBlocked) {
  // Batch 1, then a symbolic batch (blocked as well) run at batch 2.
  for (const std::string n : {"1", "s0"}) {
    const std::string text = "graph(%x: f32[" + n + R"(, 64, 8, 8], %w1: f32[64, 64, 3, 3], %w2: f32[64, 64, 1, 1], %b: f32[64]) {
  %a: f32[)" + n + R"(, 64, 8, 8] = conv2d(%x, %w1, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1], activation=[1]}
  %c: f32[)" + n + R"(, 64, 8, 8] = conv2d(%a, %w2, %b, %x) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1], has_residual=[1], activation=[1]}
  return (%c)
})";
    Graph plain = parse_graph(text), g = parse_graph(text);
    ASSERT_EQ(setenv("ZENITH_NCHWC", "0", 1), 0);
    EXPECT_EQ(layout_nchwc(g), 0);  // turned off
    unsetenv("ZENITH_NCHWC");
    EXPECT_EQ(layout_nchwc(g), 2);  // on by default, at batch 1 and for a symbolic batch
    dead_code_elimination(g);
    verify(g);
    std::map<Op, int> ops;
    for (const Node& node : g.nodes) ++ops[node.op];
    EXPECT_EQ(ops[Op::to_nchwc], 1);  // x, read by both convs (input, residual)
    EXPECT_EQ(ops[Op::conv2d_nchwc], 2);
    EXPECT_EQ(ops[Op::from_nchwc], 1);
    EXPECT_EQ(ops[Op::conv2d], 0);
    const int64_t N = n == "1" ? 1 : 2;
    auto x = randn(size_t(N * 64 * 64), 21), w1 = randn(64 * 64 * 9, 22), w2 = randn(64 * 64, 23), b = randn(64, 24);
    for (auto* v : {&w1, &w2})
      for (auto& e : *v) e *= 0.1f;
    std::vector<InTensor> ins = {{x.data(), DType::f32, {N, 64, 8, 8}},
                                 {w1.data(), DType::f32, {64, 64, 3, 3}},
                                 {w2.data(), DType::f32, {64, 64, 1, 1}},
                                 {b.data(), DType::f32, {64}}};
    Executable a(std::move(plain)), bl(std::move(g));
    auto want = a.run(ins, {}), got = bl.run(ins, {});
    for (int64_t i = 0; i < N * 64 * 64; ++i) {
      const float wv = static_cast<const float*>(want[0].data)[i], gv = static_cast<const float*>(got[0].data)[i];
      ASSERT_NEAR(gv, wv, 1e-4f * (1 + std::fabs(wv))) << "batch " << n << " at " << i;
    }
  }
}

// Which Winograd variant a blocked 3x3 conv prepares (the packed filters' kind, the
// first number of its weight key): F(4x4) only where the products it saves, 16 T2 - 36 T4
// per channel pair, reach 40 x the block's lanes (winograd4_pays). ResNet-50's maps:
// 14 x 14 from batch 4 with 16-channel blocks and from batch 2 with 8; 7 x 7 from batch 6
// and 3; 28 x 28 at batch 1.
TEST(ConvNchwc, WinogradVariantFollowsTheFilterCostModel) {
  const auto prepared_side = [](int64_t N, int64_t C, int64_t HW, int64_t L) {
    const std::string cb = std::to_string(C / L), l = std::to_string(L), n = std::to_string(N),
                      c = std::to_string(C), hw = std::to_string(HW);
    Graph g = parse_graph("graph(%x: f32[" + n + ", " + cb + ", " + hw + ", " + hw + ", " + l + "], %w: f32[" + c +
                          ", " + c + ", 3, 3]) {\n  %y: f32[" + n + ", " + cb + ", " + hw + ", " + hw + ", " + l +
                          "] = conv2d_nchwc(%x, %w, %w) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], has_bias=[0]}\n"
                          "  return (%y)\n})");
    const Node& node = g.nodes.back();
    EXPECT_EQ(node.op, Op::conv2d_nchwc);
    std::vector<TensorRef> in = {{nullptr, DType::f32, {N, C / L, HW, HW, L}},
                                 {nullptr, DType::f32, {C, C, 3, 3}},
                                 {nullptr, DType::f32, {C, C, 3, 3}}};  // (the bias slot, unused)
    std::vector<TensorRef> out = {{nullptr, DType::f32, {N, C / L, HW, HW, L}}};
    const PreparedOp p = prepare_node(node, in, out);
    return p.weight.key.empty() ? int64_t(-1) : p.weight.key[0];
  };
  struct Case {
    int64_t N, C, HW, L;
    bool f4;  // F(4x4) expected
  };
  for (const Case& k : std::vector<Case>{{1, 256, 14, 16, false}, {2, 256, 14, 16, false}, {4, 256, 14, 16, true},
                                         {1, 256, 14, 8, false},  {2, 256, 14, 8, true},   {5, 512, 7, 16, false},
                                         {6, 512, 7, 16, true},   {2, 512, 7, 8, false},   {3, 512, 7, 8, true},
                                         {1, 128, 28, 16, true},  {1, 128, 28, 8, true},   {1, 64, 56, 16, true}})
    EXPECT_EQ(prepared_side(k.N, k.C, k.HW, k.L), k.f4 ? PackedOperand::kWinograd4 : PackedOperand::kWinograd)
        << "batch " << k.N << ", " << k.C << " channels on " << k.HW << " x " << k.HW << ", blocks of " << k.L;
}

// A max pooling between a stem and blocked convs (ResNet's) runs blocked: the stem writes
// the blocked layout, max_pool2d_nchwc pools it, the convs read it; nothing converts in,
// and the pooled map returned converts out. A dilated pool (a window could lie wholly
// in the padding) stays NCHW, and its stem with it. Both compute what they did.
TEST(Passes, LayoutNchwcRunsPoolsBetweenStemAndChain) {
  for (int dil : {1, 2}) {
    const std::string d = std::to_string(dil), ph = dil == 1 ? "5" : "4";
    const std::string text = R"(graph(%x: f32[2, 3, 17, 17], %w0: f32[20, 3, 3, 3], %w1: f32[24, 20, 1, 1], %w2: f32[24, 24, 3, 3], %b: f32[24]) {
  %s: f32[2, 20, 9, 9] = conv2d(%x, %w0, %w0) {stride=[2, 2], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[0], activation=[1]}
  %p: f32[2, 20, )" + ph + ", " + ph + R"(] = max_pool2d(%s) {kernel=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[)" + d + ", " + d + R"(], ceil_mode=[0]}
  %c: f32[2, 24, )" + ph + ", " + ph + R"(] = conv2d(%p, %w1, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1], activation=[1]}
  %e: f32[2, 24, )" + ph + ", " + ph + R"(] = conv2d(%c, %w2, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1]}
  return (%e, %p)
})";
    Graph plain = parse_graph(text), g = parse_graph(text);
    layout_nchwc(g);
    dead_code_elimination(g);
    verify(g);
    std::map<Op, int> ops;
    for (const Node& n : g.nodes) ++ops[n.op];
    if (dil == 1) {
      EXPECT_EQ(ops[Op::max_pool2d_nchwc], 1);
      EXPECT_EQ(ops[Op::max_pool2d], 0);
      EXPECT_EQ(ops[Op::conv2d_nchwc], 3);  // the stem among them, over the NCHW image
      EXPECT_EQ(ops[Op::to_nchwc], 0);
      EXPECT_EQ(ops[Op::from_nchwc], 2);  // %e and the pooled %p, both returned
    } else {
      EXPECT_EQ(ops[Op::max_pool2d_nchwc], 0);
      EXPECT_EQ(ops[Op::max_pool2d], 1);
      EXPECT_EQ(ops[Op::conv2d], 1);  // the stem: its only reader stays NCHW
      EXPECT_EQ(ops[Op::to_nchwc], 1);
    }
    SCOPED_TRACE("dilation " + d);
    expect_same_outputs(std::move(plain), std::move(g), {{2, 3, 17, 17}, {20, 3, 3, 3}, {24, 20, 1, 1}, {24, 24, 3, 3}, {24}},
                        2);
  }
}

// A conv with no blocked neighbour (a training graph's conv -> batch_norm -> relu)
// stays conv2d: blocking it would only add the conversions.
TEST(Passes, LayoutNchwcLeavesLoneConvs) {
  Graph g = parse_graph(R"(graph(%x: f32[2, 16, 6, 6], %w: f32[16, 16, 3, 3], %b: f32[16]) {
  %a: f32[2, 16, 6, 6] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1]}
  %r: f32[2, 16, 6, 6] = relu(%a)
  %c: f32[2, 16, 6, 6] = conv2d(%r, %w, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[1]}
  return (%c)
})");
  EXPECT_EQ(layout_nchwc(g), 0);
  for (const Node& n : g.nodes) EXPECT_NE(n.op, Op::to_nchwc);
}

// An infinity in the input leaves the padding channels zero (the tile's sum over zero
// filters is NaN there), so the next conv's zero filters for them cannot spread NaN.
TEST(Kernels, NchwcConvKeepsPaddingChannelsZeroOnInfinities) {
  NchwcConvGeom g;
  g.N = 1, g.C = 16, g.H = g.W = g.OH = g.OW = 5, g.OC = 5, g.KH = g.KW = 1, g.L = 8;
  auto x = randn(size_t(16 * 25), 31), w = randn(size_t(5 * 16), 32);
  x[7] = INFINITY;
  auto xb = blocked(x, 1, 16, 25, 8);
  std::vector<float> out(size_t(8 * 25), -1.0f);
  conv2d_nchwc(g, xb.data(), conv2d_nchwc_pack(g, w.data()), nullptr, nullptr, nullptr, Activation::kRelu, out.data());
  for (int64_t p = 0; p < 25; ++p)
    for (int64_t j = 5; j < 8; ++j) ASSERT_EQ(out[size_t(p * 8 + j)], 0.0f) << p << " " << j;
}

// Convs next to a conv that stays NCHW (a depthwise conv reading the chain's output, as
// in MobileNets) stay NCHW too, the whole chain in turn: the conversions would move the
// block's largest tensors.
TEST(Passes, LayoutNchwcLeavesChainsNextToDepthwiseConvs) {
  Graph g = parse_graph(R"(graph(%x: f32[2, 16, 6, 6], %w: f32[32, 16, 1, 1], %w2: f32[32, 32, 1, 1], %wd: f32[32, 1, 3, 3], %b: f32[32]) {
  %a: f32[2, 32, 6, 6] = conv2d(%x, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %c: f32[2, 32, 6, 6] = conv2d(%a, %w2, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %d: f32[2, 32, 6, 6] = conv2d(%c, %wd, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[32], has_bias=[1]}
  return (%d)
})");
  EXPECT_EQ(layout_nchwc(g), 0);
  // A stem (3 channels in) feeding the chain does not hold it back.
  Graph s = parse_graph(R"(graph(%x: f32[2, 3, 6, 6], %w0: f32[16, 3, 3, 3], %w: f32[32, 16, 1, 1], %w2: f32[32, 32, 1, 1], %b: f32[32]) {
  %s: f32[2, 16, 6, 6] = conv2d(%x, %w0, %w0) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[0]}
  %a: f32[2, 32, 6, 6] = conv2d(%s, %w, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  %c: f32[2, 32, 6, 6] = conv2d(%a, %w2, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  return (%c)
})");
  // It reads its NCHW image and writes the chain's blocked input itself: no to_nchwc.
  EXPECT_EQ(layout_nchwc(s), 3);
  dead_code_elimination(s);
  verify(s);
  int blocked_stems = 0;
  for (const Node& n : s.nodes) {
    EXPECT_NE(n.op, Op::to_nchwc);
    if (n.op == Op::conv2d_nchwc && n.i("block", 0) == nchwc_block()) {
      ++blocked_stems;
      EXPECT_EQ(n.inputs[0], s.inputs[0]);
    }
  }
  EXPECT_EQ(blocked_stems, 1);
  // Nodes without inputs (a constant) beside a stem: the pass reads a node's first input
  // only once it knows the node is a conv (UBSan caught a read of an empty input list).
  Graph k = parse_graph(R"(graph(%x: f32[2, 3, 6, 6], %w0: f32[16, 3, 3, 3], %w: f32[32, 16, 1, 1], %w2: f32[32, 32, 1, 1]) {
  %z: f32[2] = constant() {dtype=[0], shape=[2]} data=0000803f00000040
  %s: f32[2, 16, 6, 6] = conv2d(%x, %w0, %w0) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[0]}
  %a: f32[2, 32, 6, 6] = conv2d(%s, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %c: f32[2, 32, 6, 6] = conv2d(%a, %w2, %w2) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  return (%c, %z)
})");
  EXPECT_EQ(layout_nchwc(k), 3);
  verify(k);
  // A stem whose readers all stay NCHW is left alone.
  Graph t = parse_graph(R"(graph(%x: f32[2, 3, 6, 6], %w0: f32[16, 3, 3, 3]) {
  %s: f32[2, 16, 6, 6] = conv2d(%x, %w0, %w0) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[1], has_bias=[0]}
  %r: f32[2, 16, 6, 6] = relu(%s)
  return (%r)
})");
  EXPECT_EQ(layout_nchwc(t), 0);
}

// depthwise_nchwc against a plain depthwise conv in double (plain_conv, groups == C) and
// against ref_conv2d_nchwc with groups == C: odd channel counts (a partial last block),
// maps narrower than a tile and wider than several, strides 1 to 3, padding 0 to 3,
// dilation, non-square filters, batches 1 to 3, every in-register and after-store
// activation, with and without a residual; the padding channels come out zero. Both
// blocks on every ISA the CPU has (the forced-AVX2 run covers AVX2's 16-channel block).
TEST(Kernels, NchwcDepthwiseMatchesPlainConvOverOddShapesAndEpilogues) {
  struct Case {
    int64_t N, C, H, W, KH, KW, s, p, d;
  };
  const Case cases[] = {
      {1, 16, 14, 14, 3, 3, 1, 1, 1}, {1, 40, 7, 7, 3, 3, 1, 1, 1},   {2, 17, 9, 11, 3, 3, 2, 1, 1},
      {1, 5, 15, 15, 5, 5, 2, 2, 1},  {3, 24, 6, 5, 3, 3, 1, 0, 1},   {1, 8, 12, 12, 3, 3, 1, 2, 2},
      {1, 33, 10, 23, 3, 1, 3, 1, 1}, {1, 1, 4, 4, 3, 3, 1, 1, 1},    {2, 48, 28, 28, 3, 3, 2, 1, 1},
      {1, 20, 3, 2, 5, 5, 1, 3, 1},   {1, 32, 56, 56, 3, 3, 1, 1, 1},
  };
  const Activation acts[] = {Activation::kNone, Activation::kRelu,      Activation::kRelu6,
                             Activation::kGelu, Activation::kHardswish, Activation::kSilu};
  unsigned seed = 100;
  int ci = 0;
  for (const Case& k : cases)
    for (int64_t L : {8, 16}) {
      NchwcConvGeom g;
      g.N = k.N, g.C = g.OC = g.groups = k.C, g.H = k.H, g.W = k.W, g.KH = k.KH, g.KW = k.KW, g.L = L;
      g.st = {k.s, k.s}, g.pd = {k.p, k.p}, g.dl = {k.d, k.d};
      g.OH = (k.H + 2 * k.p - k.d * (k.KH - 1) - 1) / k.s + 1;
      g.OW = (k.W + 2 * k.p - k.d * (k.KW - 1) - 1) / k.s + 1;
      const int64_t CB = (k.C + L - 1) / L, OP = g.OH * g.OW;
      auto x = randn(size_t(k.N * k.C * k.H * k.W), seed++), w = randn(size_t(k.C * k.KH * k.KW), seed++);
      auto scale = randn(size_t(k.C), seed++), shift = randn(size_t(k.C), seed++);
      auto res = randn(size_t(k.N * k.C * OP), seed++);
      const Activation act = acts[ci % 6];
      const bool with_res = ci++ % 4 >= 2;
      auto want = plain_conv(g, x, w, scale, shift, with_res ? res.data() : nullptr, act);
      auto xb = blocked(x, k.N, k.C, k.H * k.W, L), rb = blocked(res, k.N, k.C, OP, L);
      const PackedOperand pw = depthwise_nchwc_pack(g, w.data());
      std::vector<float> ob(size_t(k.N * CB * L * OP), NAN), rf(ob.size(), NAN);
      depthwise_nchwc(g, xb.data(), pw, scale.data(), shift.data(), with_res ? rb.data() : nullptr, act, ob.data());
      ref_conv2d_nchwc(g, xb.data(), w.data(), scale.data(), shift.data(), with_res ? rb.data() : nullptr, act,
                       rf.data());
      expect_blocked_output(g, ob, rf, want, 1e-5f * std::sqrt(float(k.KH * k.KW)),
                            "case " + std::to_string(ci) + " L " + std::to_string(L));
    }
}

TEST(Kernels, NchwcDepthwiseRejectsForeignFiltersAndGroups) {
  NchwcConvGeom g;
  g.N = 1, g.C = g.OC = g.groups = 16, g.H = g.W = g.OH = g.OW = 6, g.KH = g.KW = 3, g.pd = {1, 1}, g.L = 8;
  auto x = randn(size_t(16 * 36), 41), w = randn(size_t(16 * 9), 42);
  std::vector<float> out(size_t(16 * 36));
  const PackedOperand pw = depthwise_nchwc_pack(g, w.data());
  NchwcConvGeom other = g;
  other.KH = other.KW = 5;  // another conv's filters
  EXPECT_THROW(depthwise_nchwc(other, x.data(), pw, nullptr, nullptr, nullptr, Activation::kNone, out.data()), Error);
  // the direct conv's filters, and the direct conv given depthwise ones
  NchwcConvGeom dense = g;
  dense.groups = 1;
  EXPECT_THROW(depthwise_nchwc(g, x.data(), conv2d_nchwc_pack(dense, randn(16 * 16 * 9, 43).data()), nullptr, nullptr,
                               nullptr, Activation::kNone, out.data()),
               Error);
  EXPECT_THROW(conv2d_nchwc_pack(g, w.data()), Error);
  EXPECT_THROW(depthwise_nchwc_pack(dense, w.data()), Error);
  NchwcConvGeom grouped = g;
  grouped.groups = 4;  // grouped, not depthwise: neither kernel
  EXPECT_THROW(depthwise_nchwc_pack(grouped, w.data()), Error);
}

// MobileNet V2's small-map block: expand 1x1 -> depthwise 3x3 -> project 1x1 with the
// residual, all three blocked (one to_nchwc, one from_nchwc), computing what it did.
// A depthwise conv with an NCHW neighbour (squeeze-excitation's pooling reading its
// output) stays NCHW and so do its neighbours.
TEST(Passes, LayoutNchwcBlocksDepthwiseBetweenBlockedConvs) {
  const char* text = R"(graph(%x: f32[1, 24, 7, 7], %we: f32[96, 24, 1, 1], %wd: f32[96, 1, 3, 3], %wp: f32[24, 96, 1, 1], %b: f32[96], %bp: f32[24]) {
  %e: f32[1, 96, 7, 7] = conv2d(%x, %we, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1], activation=[6]}
  %d: f32[1, 96, 7, 7] = conv2d(%e, %wd, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[96], has_bias=[1], activation=[6]}
  %p: f32[1, 24, 7, 7] = conv2d(%d, %wp, %bp, %x) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1], has_residual=[1]}
  return (%p)
})";
  Graph plain = parse_graph(text), g = parse_graph(text);
  EXPECT_EQ(layout_nchwc(g), 3);
  dead_code_elimination(g);
  verify(g);
  std::map<Op, int> ops;
  for (const Node& n : g.nodes) ++ops[n.op];
  EXPECT_EQ(ops[Op::to_nchwc], 1);  // x, read by the expand and as the residual
  EXPECT_EQ(ops[Op::conv2d_nchwc], 3);
  EXPECT_EQ(ops[Op::from_nchwc], 1);
  EXPECT_EQ(ops[Op::conv2d], 0);
  std::vector<std::vector<float>> data = {randn(24 * 49, 51), randn(96 * 24, 52), randn(96 * 9, 53),
                                          randn(24 * 96, 54), randn(96, 55),      randn(24, 56)};
  const std::vector<std::vector<int64_t>> shapes = {{1, 24, 7, 7}, {96, 24, 1, 1}, {96, 1, 3, 3},
                                                    {24, 96, 1, 1}, {96},           {24}};
  std::vector<InTensor> ins;
  for (size_t i = 0; i < data.size(); ++i) ins.push_back({data[i].data(), DType::f32, shapes[i]});
  Executable a(std::move(plain)), bl(std::move(g));
  auto want = a.run(ins, {}), got = bl.run(ins, {});
  for (int i = 0; i < 24 * 49; ++i) {
    const float w = static_cast<const float*>(want[0].data)[i], v = static_cast<const float*>(got[0].data)[i];
    ASSERT_NEAR(v, w, 1e-4f * (1 + std::fabs(w))) << i;
  }
  // The same block with the depthwise output also pooled (an NCHW reader): nothing blocked.
  Graph se = parse_graph(R"(graph(%x: f32[1, 24, 7, 7], %we: f32[96, 24, 1, 1], %wd: f32[96, 1, 3, 3], %wp: f32[24, 96, 1, 1], %b: f32[96], %bp: f32[24]) {
  %e: f32[1, 96, 7, 7] = conv2d(%x, %we, %b) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1], activation=[6]}
  %d: f32[1, 96, 7, 7] = conv2d(%e, %wd, %b) {stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[96], has_bias=[1], activation=[6]}
  %m: f32[1, 96, 1, 1] = reduce_mean(%d) {dims=[2, 3], keepdim=[1]}
  %p: f32[1, 24, 7, 7] = conv2d(%d, %wp, %bp, %x) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1], has_residual=[1]}
  return (%p, %m)
})");
  EXPECT_EQ(layout_nchwc(se), 0);
}

// ReLU in the blocked kernels' registers as relu_f: a -0 result (zero input, scale -1,
// shift -0) stays -0, as PyTorch's relu (clamp_min) and the NCHW kernels keep it; ReLU6
// keeps it as clamp does; NaN stays NaN.
TEST(Kernels, NchwcReluSignOfZeroAndNaN) {
  for (int64_t L : {8, 16}) {
    NchwcConvGeom g;
    g.N = 1, g.C = g.OC = 16, g.H = g.W = g.OH = g.OW = 5, g.KH = g.KW = 3, g.pd = {1, 1}, g.L = L;
    std::vector<float> x(size_t(16 * 25), 0.0f), w = randn(16 * 16 * 9, 61), scale(16, -1.0f), shift(16, -0.0f);
    x[3] = NAN;  // blocked: pixel 0, channel 3
    std::vector<float> out(x.size());
    for (Activation act : {Activation::kRelu, Activation::kRelu6}) {
      for (int kind = 0; kind < 4; ++kind) {  // direct, depthwise, Winograd F(2x2) and F(4x4)
        const bool dw = kind == 1;
        NchwcConvGeom gg = g;
        gg.groups = dw ? 16 : 1;
        const PackedOperand p = dw          ? depthwise_nchwc_pack(gg, w.data())
                                : kind >= 2 ? conv3x3_winograd_nchwc_pack(gg, w.data(), kind == 2 ? 2 : 4)
                                            : conv2d_nchwc_pack(gg, w.data());
        if (dw)
          depthwise_nchwc(gg, x.data(), p, scale.data(), shift.data(), nullptr, act, out.data());
        else if (kind >= 2)
          conv3x3_winograd_nchwc(gg, x.data(), p, scale.data(), shift.data(), nullptr, act, out.data());
        else
          conv2d_nchwc(gg, x.data(), p, scale.data(), shift.data(), nullptr, act, out.data());
        const char* names[] = {"direct", "depthwise", "Winograd F(2x2)", "Winograd F(4x4)"};
        const std::string what = std::string(names[kind]) + " L " + std::to_string(L);
        // A pixel far from the NaN (bottom-right corner), every channel: -0 before the activation.
        const size_t at = size_t((24 * L) % (25 * L));
        for (int64_t cb = 0; cb < 16 / L; ++cb)
          for (int64_t j = 0; j < L; ++j) {
            const float v = out[size_t(cb * 25 * L) + at + size_t(j)];
            ASSERT_EQ(v, 0.0f) << what;
            ASSERT_TRUE(std::signbit(v)) << what << " channel " << cb * L + j;
          }
        // The NaN reaches pixel 0's outputs: channel 3 for the depthwise conv, every channel for the others.
        EXPECT_TRUE(std::isnan(out[3])) << what;
      }
    }
  }
}

// conv2d_nchwc over an NCHW input (`block`): its type, and the geometries it refuses.
TEST(Ops, NchwcConvOverNchwInputChecksItsInputs) {
  Graph ok = parse_graph(R"(graph(%x: f32[2, 3, 9, 9], %w: f32[12, 3, 3, 3]) {
  %c: f32[2, 2, 4, 4, 8] = conv2d_nchwc(%x, %w, %w) {stride=[2, 2], padding=[0, 0], dilation=[1, 1], has_bias=[0], block=[8]}
  return (%c)
})");
  verify(ok);
  const char* bad[] = {
      // a block other than 8 or 16
      R"(graph(%x: f32[2, 3, 9, 9], %w: f32[12, 3, 3, 3]) {
  %c: f32[2, 3, 7, 7, 4] = conv2d_nchwc(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], block=[4]}
  return (%c)
})",
      // the weight's input channels are not the image's
      R"(graph(%x: f32[2, 3, 9, 9], %w: f32[12, 4, 3, 3]) {
  %c: f32[2, 2, 7, 7, 8] = conv2d_nchwc(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], block=[8]}
  return (%c)
})",
      // a depthwise conv over an NCHW input
      R"(graph(%x: f32[2, 3, 9, 9], %w: f32[3, 1, 3, 3]) {
  %c: f32[2, 1, 7, 7, 8] = conv2d_nchwc(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[3], has_bias=[0], block=[8]}
  return (%c)
})",
      // a blocked (5-D) input with `block`
      R"(graph(%x: f32[2, 1, 9, 9, 8], %w: f32[12, 3, 3, 3]) {
  %c: f32[2, 2, 7, 7, 8] = conv2d_nchwc(%x, %w, %w) {stride=[1, 1], padding=[0, 0], dilation=[1, 1], has_bias=[0], block=[8]}
  return (%c)
})",
  };
  for (const char* text : bad) EXPECT_THROW(parse_graph(text), Error) << text;
}

// conv2d_pw_dw_nchwc (an inverted-residual block over the blocked layout, band by band)
// against the same three convs run one at a time by the blocked kernels (a tight
// tolerance: the run kernel sums each value in the tile's order) and against plain NCHW
// convs in double: with and without the expand or the projection, odd channel counts
// (partial last blocks in, expanded and out), strides 1 and 2, 3x3 and 5x5 filters,
// padding 0 to 2, dilation 2, a residual, in-register and after-store activations for
// each part, maps wide enough for several bands per image, a band of one row, a stride
// past the filter's reach, a map shorter than it, batches 1 to 3, on 1, 2 and 3 threads
// (rows split between threads: chunks starting mid-image); the output's padding
// channels zero. Both blocks.
TEST(Kernels, NchwcPwDwMatchesTheConvsOneByOne) {
  struct Case {
    int64_t N, C, E, P, H, W, K, s, p, d;
    bool expand, project, res;
  };
  const Case cases[] = {
      {1, 16, 400, 8, 12, 120, 3, 1, 1, 1, true, true, false},   // band of 1 row
      {1, 16, 24, 8, 5, 9, 1, 2, 0, 1, true, true, false},      // stride past the reach
      {1, 16, 24, 8, 2, 9, 3, 1, 1, 1, true, true, false},      // H under the reach
      {1, 16, 96, 24, 30, 112, 3, 2, 1, 1, true, true, false},  // MobileNet V2's 112 x 112 block, cut
      {2, 24, 144, 24, 20, 56, 3, 1, 1, 1, true, true, true},   // its 56 x 56 ones, with the residual
      {1, 32, 32, 16, 40, 40, 3, 1, 1, 1, false, true, false},  // its first block: no expand
      {3, 5, 20, 3, 13, 11, 3, 1, 1, 1, true, true, false},     // odd channels everywhere
      {2, 17, 40, 17, 17, 29, 5, 2, 2, 1, true, true, true},
      {1, 20, 36, 0, 16, 30, 3, 1, 2, 2, true, false, false},   // no projection: the depthwise output
      {1, 12, 12, 12, 9, 9, 3, 2, 0, 1, false, true, true},
      {2, 8, 24, 5, 28, 28, 3, 1, 1, 1, true, true, false},
  };
  const Activation acts[] = {Activation::kRelu6, Activation::kHardswish, Activation::kNone, Activation::kRelu};
  unsigned seed = 700;
  int ci = 0;
  const ThreadsReset reset;
  for (int threads : {1, 2, 3})
  for (const Case& k : cases)
    for (int64_t L : {8, 16}) {
      set_num_threads(threads);
      ++ci;
      const int64_t E = k.expand ? k.E : k.C, P = k.project ? k.P : E;
      NchwcConvGeom ge, gd, gp;  // expand, depthwise, projection
      ge.N = gd.N = gp.N = k.N, ge.L = gd.L = gp.L = L;
      ge.C = k.C, ge.OC = E, ge.H = ge.OH = k.H, ge.W = ge.OW = k.W, ge.KH = ge.KW = 1;
      gd.C = gd.OC = gd.groups = E, gd.H = k.H, gd.W = k.W, gd.KH = gd.KW = k.K;
      gd.st = {k.s, k.s}, gd.pd = {k.p, k.p}, gd.dl = {k.d, k.d};
      gd.OH = (k.H + 2 * k.p - k.d * (k.K - 1) - 1) / k.s + 1;
      gd.OW = (k.W + 2 * k.p - k.d * (k.K - 1) - 1) / k.s + 1;
      const int64_t OP = gd.OH * gd.OW;
      gp.C = E, gp.OC = P, gp.H = gp.OH = gd.OH, gp.W = gp.OW = gd.OW, gp.KH = gp.KW = 1;
      // Fan-in scaled filters keep the values near 1 through the chain.
      auto scaled = [&](size_t n, int64_t fan) {
        auto v = randn(n, seed++);
        for (float& f : v) f /= std::sqrt(float(fan));
        return v;
      };
      auto x = randn(size_t(k.N * k.C * k.H * k.W), seed++);
      auto w1 = scaled(size_t(E * k.C), k.C), w2 = scaled(size_t(E * k.K * k.K), k.K * k.K),
           w3 = scaled(size_t(P * E), E);
      auto s1 = randn(size_t(E), seed++), t1 = randn(size_t(E), seed++), s2 = randn(size_t(E), seed++),
           t2 = randn(size_t(E), seed++), s3 = randn(size_t(P), seed++), t3 = randn(size_t(P), seed++);
      auto res = randn(size_t(k.N * P * OP), seed++);
      const Activation a1 = acts[ci % 4], a2 = acts[(ci + 1) % 4], a3 = acts[(ci + 2) % 4];
      const float* rp = k.res ? res.data() : nullptr;
      // Plain NCHW in double, conv by conv.
      std::vector<float> want = k.expand ? plain_conv(ge, x, w1, s1, t1, nullptr, a1) : x;
      want = plain_conv(gd, want, w2, s2, t2, k.project ? nullptr : rp, a2);
      if (k.project) want = plain_conv(gp, want, w3, s3, t3, rp, a3);
      // The blocked kernels one at a time (their 1x1 convs by the run kernel the fused block
      // uses too: `want`, in double, is the independent reference).
      const int64_t EB = (E + L - 1) / L, OB = (P + L - 1) / L;
      auto xb = blocked(x, k.N, k.C, k.H * k.W, L), rb = blocked(res, k.N, P, OP, L);
      const PackedOperand p1 = k.expand ? conv2d_nchwc_pack(ge, w1.data()) : PackedOperand{};
      const PackedOperand p2 = depthwise_nchwc_pack(gd, w2.data());
      const PackedOperand p3 = k.project ? conv2d_nchwc_pack(gp, w3.data()) : PackedOperand{};
      std::vector<float> e(size_t(k.N * EB * L * k.H * k.W)), dwo(size_t(k.N * EB * L * OP));
      std::vector<float> one(size_t(k.N * OB * L * OP), NAN);
      if (k.expand) conv2d_nchwc(ge, xb.data(), p1, s1.data(), t1.data(), nullptr, a1, e.data());
      depthwise_nchwc(gd, k.expand ? e.data() : xb.data(), p2, s2.data(), t2.data(), nullptr, a2,
                      k.project ? dwo.data() : one.data());
      if (k.project) conv2d_nchwc(gp, dwo.data(), p3, s3.data(), t3.data(), k.res ? rb.data() : nullptr, a3, one.data());
      // Fused.
      std::vector<float> got(one.size(), NAN);
      conv2d_pw_dw_nchwc(gd, k.C, P, {k.expand ? &p1 : nullptr, s1.data(), t1.data(), a1},
                         {&p2, s2.data(), t2.data(), a2}, {k.project ? &p3 : nullptr, s3.data(), t3.data(), a3},
                         xb.data(), k.res ? rb.data() : nullptr, got.data());
      NchwcConvGeom go = gp;
      go.OC = P;
      expect_blocked_output(go, got, one, want, 1e-4f, "case " + std::to_string(ci) + " L " + std::to_string(L));
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], one[i], 1e-6f * (1 + std::fabs(one[i]))) << "case " << ci << " L " << L << " at " << i;
    }
}

TEST(ConvNchwc, PwDwBlockedFiltersPackedOnceWhenConstant) {
  // A blocked inverted-residual block (expand, depthwise, projection with its residual)
  // whose three filters are constant: packed together on the first call (one WeightPack
  // over three inputs), kept, and repacked when one of them moves. Against the same
  // node packing per call and the three blocked convs one by one.
  const std::string sig =
      "graph(%x: f32[2, 2, 28, 28, 8], %w: f32[20, 16, 1, 1], %k: f32[20, 1, 3, 3], %b: f32[20], "
      "%u: f32[16, 20, 1, 1], %c: f32[16]) {\n";
  Executable fused(parse_graph(sig + R"(  %p: f32[2, 2, 28, 28, 8] = conv2d_pw_dw(%x, %w, %w, %k, %b, %u, %c, %x) {activation=[7], dilation=[1, 1], has_bias=[1], has_residual=[1], padding=[1, 1], pj_has_bias=[1], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1]}
  return (%p)
})")),
      per_call(parse_graph(sig + R"(  %p: f32[2, 2, 28, 28, 8] = conv2d_pw_dw(%x, %w, %w, %k, %b, %u, %c, %x) {activation=[7], dilation=[1, 1], has_bias=[1], has_residual=[1], padding=[1, 1], pj_has_bias=[1], project=[1], pw_activation=[7], pw_has_bias=[0], stride=[1, 1]}
  return (%p)
})")),
      apart(parse_graph(sig + R"(  %e: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%x, %w, %w) {activation=[7], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[0]}
  %d: f32[2, 3, 28, 28, 8] = conv2d_nchwc(%e, %k, %b) {activation=[7], stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=[20], has_bias=[1]}
  %p: f32[2, 2, 28, 28, 8] = conv2d_nchwc(%d, %u, %c, %x) {has_residual=[1], stride=[1, 1], padding=[0, 0], dilation=[1, 1], groups=[1], has_bias=[1]}
  return (%p)
})"));
  fused.set_constant_inputs({1, 2, 3, 4, 5});
  auto x = randn(size_t(2 * 2 * 28 * 28 * 8), 1), w = randn(20 * 16, 2), k = randn(20 * 9, 3), k2 = randn(20 * 9, 4);
  auto b = randn(20, 5), u = randn(16 * 20, 6), c = randn(16, 7);
  auto inputs = [&](const std::vector<float>& dw) {
    return std::vector<InTensor>{{x.data(), DType::f32, {2, 2, 28, 28, 8}}, {w.data(), DType::f32, {20, 16, 1, 1}},
                                 {dw.data(), DType::f32, {20, 1, 3, 3}},    {b.data(), DType::f32, {20}},
                                 {u.data(), DType::f32, {16, 20, 1, 1}},    {c.data(), DType::f32, {16}}};
  };
  const size_t filter_bytes = (20 * 16 + 20 * 9 + 16 * 20) * sizeof(float);
  for (const auto* dw : {&k, &k, &k2}) {  // packed, kept, repacked for the moved depthwise filter
    auto got = fused.run(inputs(*dw), {}), want = per_call.run(inputs(*dw), {}), one_by_one = apart.run(inputs(*dw), {});
    EXPECT_EQ(fused.packed_bytes(), filter_bytes);
    EXPECT_EQ(per_call.packed_bytes(), 0u);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(static_cast<const float*>(got[0].data)[i], static_cast<const float*>(want[0].data)[i]) << i;
      ASSERT_EQ(static_cast<const float*>(got[0].data)[i], static_cast<const float*>(one_by_one[0].data)[i]) << i;
    }
  }
}
