// In-cache sgemm with A read in place (row-major, N <= 1024): the GEMMs of MobileNet's fused
// blocks and of Winograd, median of 2000 calls. Run with and without 2bd4b30's prefetch
// (a temporary switch ZENITH_NO_ROWS_PF=1): within +-5%, no consistent direction.
// g++ -O2 -std=c++17 -march=x86-64-v3 -Icsrc rows_prefetch_hot.cc build/cpp/libzenith_core.a -fopenmp
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include "zenith/kernels/kernels.h"
using namespace zenith;
int main() {
  int shapes[][3] = {{960, 224, 160}, {144, 448, 24}, {96, 1792, 16}, {320, 196, 960}, {256, 49, 256}, {512, 16, 512}};
  for (auto& s : shapes) {
    int M = s[0], N = s[1], K = s[2];
    std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
    std::vector<double> ts;
    for (int it = 0; it < 2000; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      sgemm(M, N, K, 1.0f, a.data(), K, 1, b.data(), N, 1, c.data(), N, false, nullptr, nullptr);
      ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ts.begin(), ts.end());
    printf("%d x %d x %d: %.2f us %.0f GF/s\n", M, N, K, ts[1000] * 1e6, 2.0 * M * N * K / ts[1000] / 1e9);
  }
}
