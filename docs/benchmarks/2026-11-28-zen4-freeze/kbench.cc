#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  int C = atoi(argv[1]), HW = atoi(argv[2]), L = atoi(argv[3]), th = atoi(argv[4]);
  set_num_threads(th);
  NchwcConvGeom g; g.N = 1; g.C = C; g.H = g.W = g.OH = g.OW = HW; g.OC = C; g.KH = g.KW = 1; g.L = L;
  int off = argc > 5 ? atoi(argv[5]) : 0;
  const int64_t CP = (C + L - 1) / L * L;
  float* xa = static_cast<float*>(std::aligned_alloc(64, size_t(CP * HW * HW * 4 + 64)));
  float* outp = static_cast<float*>(std::aligned_alloc(64, size_t(CP * HW * HW * 4 + 4096 * 4))) + off;
  std::vector<float> w(size_t(C * C)), sc(CP, 1.0f), sh(CP, 0.0f);
  std::vector<float> x(size_t(CP * HW * HW));
  for (int64_t i = 0; i < CP * HW * HW; ++i) xa[i] = float(rand() % 100) / 100.0f;
  for (auto& v : w) v = float(rand() % 100) / 1000.0f;
  PackedOperand p = conv2d_nchwc_pack(g, w.data());
  for (int i = 0; i < 20; ++i) conv2d_nchwc(g, xa, p, sc.data(), sh.data(), nullptr, Activation::kRelu, outp);
  int R = 300;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < R; ++i) conv2d_nchwc(g, xa, p, sc.data(), sh.data(), nullptr, Activation::kRelu, outp);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / R;
  printf("C %d HW %d L %d threads %d: %.3f ms %.1f GFLOP/s\n", C, HW, L, th, s * 1e3, 2.0 * C * C * HW * HW / s / 1e9);
}
