// One 3x3 conv (C -> C, stride 1, padding 1, ReLU) over the blocked layout, alone: F(2x2) Winograd,
// F(4x4) Winograd and the direct conv, interleaved, median of 15 batches:
//   g++ -O2 -std=c++17 -Icsrc winograd_f2_f4.cc build/cpp/libzenith_core.a -fopenmp -o wg && ./wg C HW threads [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  int C = atoi(argv[1]), HW = atoi(argv[2]), th = atoi(argv[3]), N = argc > 4 ? atoi(argv[4]) : 1;
  set_num_threads(th);
  NchwcConvGeom g; g.N = N; g.C = C; g.H = g.W = g.OH = g.OW = HW; g.OC = C; g.KH = g.KW = 3; g.pd = {1, 1};
  g.L = nchwc_block();
  size_t n = size_t(N) * C * HW * HW;
  std::vector<float> x(n), out(n), w(size_t(C) * C * 9), sc(C, 1.0f), sh(C, 0.0f);
  for (auto& v : x) v = float(rand() % 100) / 100.0f;
  for (auto& v : w) v = float(rand() % 100) / 1000.0f;
  PackedOperand p2 = conv3x3_winograd_nchwc_pack(g, w.data(), 2), p4 = conv3x3_winograd_nchwc_pack(g, w.data(), 4);
  PackedOperand pd = conv2d_nchwc_pack(g, w.data());
  double flop = 2.0 * N * C * C * 9 * HW * HW;
  int R = std::max(5, int(1e8 / flop));
  std::vector<double> t[3];
  for (int b = 0; b < 15; ++b)
    for (int k = 0; k < 3; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < R; ++i) {
        if (k == 2) conv2d_nchwc(g, x.data(), pd, sc.data(), sh.data(), nullptr, Activation::kRelu, out.data());
        else conv3x3_winograd_nchwc(g, x.data(), k ? p4 : p2, sc.data(), sh.data(), nullptr, Activation::kRelu, out.data());
      }
      t[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / R);
    }
  for (auto& v : t) std::sort(v.begin(), v.end());
  printf("C %4d HW %3d N %d th %d: F2 %.4f ms (%5.0f)  F4 %.4f ms (%5.0f)  direct %.4f ms (%5.0f) eff GFLOP/s\n", C, HW, N, th,
         t[0][7] * 1e3, flop / t[0][7] / 1e9, t[1][7] * 1e3, flop / t[1][7] / 1e9, t[2][7] * 1e3, flop / t[2][7] / 1e9);
}
