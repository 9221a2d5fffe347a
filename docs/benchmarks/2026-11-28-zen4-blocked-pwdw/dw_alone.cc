// Build: g++ -O2 -std=c++17 -Icsrc <this> build/cpp/libzenith_core.a -fopenmp; args: C H stride [K]; T=threads. The A/B used a temporary XDWK switch (set: the run-time width) in pick_dw_k.
// depthwise_nchwc alone, in cache: C channels on H x H, stride S, repeated; 2 threads.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(getenv("T") ? atoi(getenv("T")) : 2);
  const int64_t C = atoi(argv[1]), H = atoi(argv[2]), S = atoi(argv[3]), K = argc > 4 ? atoi(argv[4]) : 3, L = 8, reps = 50;
  NchwcConvGeom g; g.N = 1; g.L = L; g.C = g.OC = g.groups = C; g.H = g.W = H; g.KH = g.KW = K; g.st = {S, S};
  g.pd = {K / 2, K / 2}; g.OH = g.OW = (H + 2 * (K / 2) - K) / S + 1;
  std::vector<float> w(C * K * K, 0.1f), sc(C, 1.0f), sh(C, 0.0f), x(((C + L - 1) / L) * L * H * H, 0.5f), o(((C + L - 1) / L) * L * g.OH * g.OW);
  auto p = depthwise_nchwc_pack(g, w.data());
  std::vector<double> t;
  for (int r = 0; r < 15; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) depthwise_nchwc(g, x.data(), p, sc.data(), sh.data(), nullptr, Activation::kRelu6, o.data());
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(t.begin(), t.end());
  std::printf("dw C %ld %ldx%ld s%ld k%ld: %.1f us (%.1f GFLOP/s)\n", C, H, H, S, K, t[7], 2.0 * C * g.OH * g.OW * K * K / t[7] / 1e3);
}
