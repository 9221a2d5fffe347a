// MobileNet V2 blocks at b8: fused conv2d_pw_dw_nchwc vs the three blocked convs one by one
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
using namespace zenith;
using clk = std::chrono::steady_clock;
static double sec(clk::time_point a, clk::time_point b) { return std::chrono::duration<double>(b - a).count(); }
int main(int argc, char** argv) {
  set_num_threads(argc > 2 ? atoi(argv[2]) : 2);
  int N = atoi(argv[1]);
  struct K { int C, E, P, H, s; bool res; } ks[] = {{16, 96, 24, 112, 2, false}, {24, 144, 24, 56, 1, true}, {24, 144, 32, 56, 2, false}, {32, 192, 32, 28, 1, true}};
  const int64_t L = nchwc_block();
  for (auto k : ks) {
    NchwcConvGeom ge, gd, gp;
    ge.N = gd.N = gp.N = N; ge.L = gd.L = gp.L = L;
    ge.C = k.C; ge.OC = k.E; ge.H = ge.OH = ge.W = ge.OW = k.H; ge.KH = ge.KW = 1;
    gd.C = gd.OC = gd.groups = k.E; gd.H = gd.W = k.H; gd.KH = gd.KW = 3; gd.st = {k.s, k.s}; gd.pd = {1, 1};
    gd.OH = gd.OW = (k.H + 2 - 3) / k.s + 1;
    gp.C = k.E; gp.OC = k.P; gp.H = gp.OH = gp.W = gp.OW = gd.OH; gp.KH = gp.KW = 1;
    const int64_t OP = gd.OH * gd.OW, EB = (k.E + L - 1) / L, CB = (k.C + L - 1) / L, PB = (k.P + L - 1) / L;
    std::vector<float> x(size_t(N) * CB * L * k.H * k.H, 0.1f), w1(size_t(k.E) * k.C, 0.01f), w2(size_t(k.E) * 9, 0.1f), w3(size_t(k.P) * k.E, 0.01f);
    std::vector<float> s(k.E > k.P ? k.E : k.P, 1.0f), t(s.size(), 0.0f);
    std::vector<float> e(size_t(N) * EB * L * k.H * k.H), d(size_t(N) * EB * L * OP), o(size_t(N) * PB * L * OP), o2(o.size()), r(o.size(), 0.5f);
    PackedOperand p1 = conv2d_nchwc_pack(ge, w1.data()), p2 = depthwise_nchwc_pack(gd, w2.data()), p3 = conv2d_nchwc_pack(gp, w3.data());
    const float* rp = k.res ? r.data() : nullptr;
    std::vector<double> tf, te, td, tp;
    for (int it = 0; it < 40; ++it) {
      auto a = clk::now();
      conv2d_pw_dw_nchwc(gd, k.C, k.P, {&p1, s.data(), t.data(), Activation::kRelu6}, {&p2, s.data(), t.data(), Activation::kRelu6},
                         {&p3, s.data(), t.data(), Activation::kNone}, x.data(), rp, o.data());
      auto b = clk::now();
      if (getenv("FUSED_ONLY")) { tf.push_back(sec(a, b)); te.push_back(0); td.push_back(0); tp.push_back(0); continue; }
      conv2d_nchwc(ge, x.data(), p1, s.data(), t.data(), nullptr, Activation::kRelu6, e.data());
      auto c = clk::now();
      depthwise_nchwc(gd, e.data(), p2, s.data(), t.data(), nullptr, Activation::kRelu6, d.data());
      auto dd = clk::now();
      conv2d_nchwc(gp, d.data(), p3, s.data(), t.data(), rp, Activation::kNone, o2.data());
      auto ee = clk::now();
      tf.push_back(sec(a, b)); te.push_back(sec(b, c)); td.push_back(sec(c, dd)); tp.push_back(sec(dd, ee));
    }
    for (auto* v : {&tf, &te, &td, &tp}) std::sort(v->begin(), v->end());
    double fe = 2.0 * N * k.C * k.E * k.H * k.H, fd = 2.0 * N * 9 * k.E * OP, fp = 2.0 * N * k.E * k.P * OP;
    printf("N%d %3d->%3d->%3d @%3d s%d: fused %7.1f us (%5.1f GF/s) | expand %7.1f (%5.1f) dw %6.1f (%5.1f) project %6.1f (%5.1f) sum %7.1f\n", N, k.C, k.E, k.P, k.H, k.s,
           tf[20] * 1e6, (fe + fd + fp) / tf[20] / 1e9, te[20] * 1e6, fe / te[20] / 1e9, td[20] * 1e6, fd / td[20] / 1e9, tp[20] * 1e6, fp / tp[20] / 1e9, (te[20] + td[20] + tp[20]) * 1e6);
  }
}
