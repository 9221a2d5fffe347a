// Cold-ish A/B: a ring of R distinct conv instances (weights, input, residual, output) per shape,
// blocked conv (library, ZT_NOPF toggled by variant via two processes) vs NCHW sgemm path.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <algorithm>
#include <random>
#include <functional>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  zenith::set_num_threads(2);
  struct S { int64_t C, OC, H, K, s; bool res; };
  std::vector<S> shapes = {{1024, 256, 14, 1, 1, false}, {128, 512, 28, 1, 1, true}, {2048, 512, 7, 1, 1, false},
                           {256, 1024, 14, 1, 1, true}, {64, 256, 56, 1, 1, true}, {256, 64, 56, 1, 1, false},
                           {512, 1024, 28, 1, 2, false}, {128, 128, 56, 3, 2, false}};
  const int R = 12;
  std::mt19937 rng(0);
  std::normal_distribution<float> nd;
  const int64_t L = nchwc_block();
  for (auto s : shapes) {
    NchwcConvGeom g;
    g.N = 1; g.C = s.C; g.H = g.W = s.H; g.OC = s.OC; g.KH = g.KW = s.K; g.L = L;
    g.st = {s.s, s.s}; g.pd = {s.K / 2, s.K / 2};
    g.OH = g.OW = (s.H + 2 * (s.K / 2) - s.K) / s.s + 1;
    const int64_t P = s.H * s.H, OP = g.OH * g.OW, T = s.K * s.K;
    struct Inst { std::vector<float> x, xb, w, sc, sh, r, rb, o, ob; PackedOperand pa, pb; };
    std::vector<Inst> in(R);
    for (auto& I : in) {
      I.x.resize(s.C * P); I.w.resize(s.OC * s.C * T); I.sc.resize(s.OC); I.sh.resize(s.OC); I.r.resize(s.OC * OP);
      for (auto& v : I.x) v = nd(rng);
      for (auto& v : I.w) v = nd(rng) * 0.05f;
      for (auto& v : I.sc) v = 1 + 0.1f * nd(rng);
      for (auto& v : I.sh) v = nd(rng);
      for (auto& v : I.r) v = nd(rng);
      I.xb.resize((s.C + L - 1) / L * L * P); nchw_to_nchwc(I.x.data(), 1, s.C, P, L, I.xb.data());
      I.rb.resize((s.OC + L - 1) / L * L * OP); nchw_to_nchwc(I.r.data(), 1, s.OC, OP, L, I.rb.data());
      I.o.resize(s.OC * OP); I.ob.resize(I.rb.size());
      I.pa = sgemm_pack_a(s.OC, s.C * T, I.w.data(), s.C * T, 1);
      I.pb = conv2d_nchwc_pack(g, I.w.data());
    }
    std::vector<float> col;
    auto fa = [&](Inst& I) {
      GemmEpilogue ep; ep.row_scale = I.sc.data(); ep.row_shift = I.sh.data(); ep.act = Activation::kRelu;
      if (s.res) { ep.residual = I.r.data(); ep.ld_residual = OP; }
      if (s.K == 1 && s.s == 1) sgemm(s.OC, P, s.C, 1.0f, I.w.data(), s.C, 1, I.x.data(), P, 1, I.o.data(), P, false, &I.pa, &ep);
      else {
        col.resize(s.C * T * OP);
        zenith::parallel_for(s.C * T, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t row = lo; row < hi; ++row) {
            int64_t c = row / T, kh = (row % T) / s.K, kw = row % s.K;
            for (int64_t oh = 0; oh < g.OH; ++oh) for (int64_t ow = 0; ow < g.OW; ++ow) {
              int64_t ih = oh * s.s - g.pd[0] + kh, iw = ow * s.s - g.pd[1] + kw;
              col[row * OP + oh * g.OW + ow] = ih >= 0 && ih < s.H && iw >= 0 && iw < s.H ? I.x[c * P + ih * s.H + iw] : 0.f;
            }
          }
        });
        sgemm(s.OC, OP, s.C * T, 1.0f, I.w.data(), s.C * T, 1, col.data(), OP, 1, I.o.data(), OP, false, &I.pa, &ep);
      }
    };
    auto fb = [&](Inst& I) {
      conv2d_nchwc(g, I.xb.data(), I.pb, I.sc.data(), I.sh.data(), s.res ? I.rb.data() : nullptr, Activation::kRelu, I.ob.data());
    };
    std::vector<double> ta, tb;
    for (int rep = 0; rep < 30; ++rep) {
      double t0 = now(); for (auto& I : in) fa(I); double t1 = now(); for (auto& I : in) fb(I); double t2 = now();
      ta.push_back((t1 - t0) / R); tb.push_back((t2 - t1) / R);
    }
    std::sort(ta.begin(), ta.end()); std::sort(tb.begin(), tb.end());
    double fl = 2.0 * s.C * s.OC * OP * T;
    printf("%5ld->%-5ld %2ldx%-2ld k%ld s%ld res=%d  nchw %.3f ms %4.0f GF/s | blocked %.3f ms %4.0f GF/s  ratio %.2f\n", s.C, s.OC, s.H, s.H, s.K, s.s, s.res,
           ta[15] * 1e3, fl / ta[15] / 1e9, tb[15] * 1e3, fl / tb[15] / 1e9, tb[15] / ta[15]);
  }
}
