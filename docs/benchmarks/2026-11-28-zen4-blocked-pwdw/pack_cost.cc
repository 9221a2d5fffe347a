// Per-call packing cost of MobileNet V2's fused blocks (blocked conv2d_pw_dw).
#include <chrono>
#include <cstdio>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main() {
  struct B { int64_t C, E, P, HW; };
  // blocks on maps of 28 x 28 and up (input map): first block (no expand), then expand blocks
  std::vector<B> blocks = {{32, 32, 16, 112}, {16, 96, 24, 112}, {24, 144, 24, 56}, {24, 144, 32, 56},
                           {32, 192, 32, 28}, {32, 192, 32, 28}, {32, 192, 64, 28}};
  std::vector<float> w(192 * 192, 0.5f);
  for (int64_t L : {8, 16}) {
    double best = 1e9;
    for (int rep = 0; rep < 200; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (const B& b : blocks) {
        NchwcConvGeom g;
        g.N = 1, g.L = L, g.H = g.W = g.OH = g.OW = b.HW, g.KH = g.KW = 1;
        NchwcConvGeom g1 = g, g3 = g, gd = g;
        g1.C = b.C, g1.OC = b.E;
        g3.C = b.E, g3.OC = b.P;
        gd.C = gd.OC = gd.groups = b.E, gd.KH = gd.KW = 3, gd.pd = {1, 1};
        if (b.C != b.E) { auto p1 = conv2d_nchwc_pack(g1, w.data()); }
        auto p2 = depthwise_nchwc_pack(gd, w.data());
        auto p3 = conv2d_nchwc_pack(g3, w.data());
      }
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, us);
    }
    std::printf("L %ld: packing the 7 fused blocks' filters: best of 200 %.1f us per call\n", long(L), best);
  }
}
