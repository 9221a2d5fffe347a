// One 1x1 conv over the blocked layout alone (KB_N images, default 1), median of 9 batches:
//   g++ -O2 -std=c++17 -Icsrc conv1x1_alone.cc build/cpp/libzenith_core.a -fopenmp -o kb && ./kb C OC HW threads residual [stride]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
// kb C OC HW threads res st: median of 9 batches of R calls
int main(int argc, char** argv) {
  int C = atoi(argv[1]), OC = atoi(argv[2]), HW = atoi(argv[3]), th = atoi(argv[4]), res = atoi(argv[5]);
  int st = argc > 6 ? atoi(argv[6]) : 1;
  set_num_threads(th);
  NchwcConvGeom g; g.N = getenv("KB_N") ? atoi(getenv("KB_N")) : 1; g.C = C; g.H = g.W = HW; g.OH = g.OW = (HW - 1) / st + 1; g.OC = OC; g.KH = g.KW = 1;
  g.st = {st, st}; g.L = nchwc_block();
  const int64_t L = g.L, CP = (C + L - 1) / L * L, OP = (OC + L - 1) / L * L;
  float* xa = static_cast<float*>(std::aligned_alloc(64, size_t(g.N * CP * HW * HW * 4 + 64)));
  float* outp = static_cast<float*>(std::aligned_alloc(64, size_t(g.N * OP * HW * HW * 4 + 64)));
  float* rp = static_cast<float*>(std::aligned_alloc(64, size_t(g.N * OP * HW * HW * 4 + 64)));
  std::vector<float> w(size_t(C * OC)), sc(OP, 1.0f), sh(OP, 0.0f);
  for (int64_t i = 0; i < g.N * CP * HW * HW; ++i) xa[i] = float(rand() % 100) / 100.0f;
  for (int64_t i = 0; i < g.N * OP * HW * HW; ++i) rp[i] = float(rand() % 100) / 100.0f;
  for (auto& v : w) v = float(rand() % 100) / 1000.0f;
  PackedOperand p = conv2d_nchwc_pack(g, w.data());
  for (int i = 0; i < 20; ++i) conv2d_nchwc(g, xa, p, sc.data(), sh.data(), res ? rp : nullptr, Activation::kRelu, outp);
  double flop = 2.0 * g.N * C * OC * g.OH * g.OW;
  int R = std::max(5, int(2e8 / flop));
  std::vector<double> v;
  for (int b = 0; b < 9; ++b) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < R; ++i) conv2d_nchwc(g, xa, p, sc.data(), sh.data(), res ? rp : nullptr, Activation::kRelu, outp);
    v.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / R);
  }
  std::sort(v.begin(), v.end());
  double s = v[4];
  printf("C %4d OC %4d HW %3d st %d L %lld th %d res %d: %.4f ms %6.1f GFLOP/s\n", C, OC, HW, st, (long long)L, th, res, s * 1e3, flop / s / 1e9);
}
