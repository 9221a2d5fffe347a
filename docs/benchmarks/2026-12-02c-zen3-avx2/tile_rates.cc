// (g++ -O2 -std=c++17 -I csrc tile_rates.cc build/cpp/libzenith_core.a -fopenmp -o tile_rates; ./tile_rates [kpad])
// single-thread rate of the AVX2 int8 GEMM tiles in L1: u8 (narrow, MR 1-2), sign-trick per-block (MR 1-4)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "zenith/kernels/quant_formats.h"
using namespace zenith; using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t kpad = argc > 1 ? atoi(argv[1]) : 384;
  const int rows = 8;
  std::vector<uint8_t> w(kpad * 32); for (auto& v : w) v = rand() & 255;
  std::vector<float> ws(32, 0.01f);
  std::vector<int8_t> q(rows * kpad); for (auto& v : q) v = (rand() % 127) - 63;
  std::vector<float> d(rows * kpad / 32, 0.02f);
  std::vector<float> y(rows * 32);
  std::vector<QActRow> a(rows);
  for (int r = 0; r < rows; ++r) a[r] = QActRow{q.data() + r * kpad, d.data() + r * kpad / 32, nullptr, nullptr};
  struct T { const char* name; const QGemmTileFn* t; int mr; };
  T ts[] = {{"u8 MR2", q8_gemm_tiles_u8_avx2(), 2}, {"u8 MR1", q8_gemm_tiles_u8_avx2(), 1},
            {"sign MR4", q8_gemm_tiles_avx2(), 4}, {"uniform MR8", q8_gemm_tiles_uniform_avx2(), 8},
            {"uniform-nonneg MR8", q8_gemm_tiles_uniform_nonneg_avx2(), 8}};
  for (auto& t : ts) {
    double best = 1e9;
    for (int rep = 0; rep < 7; ++rep) {
      const int iters = 20000;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) for (int m = 0; m + t.mr <= rows; m += t.mr)
        t.t[t.mr - 1](w.data(), ws.data(), kpad, a.data() + m, y.data() + m * 32, 32, 32);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s / iters);
    }
    std::printf("%-20s kpad %ld: %.1f GMAC/s\n", t.name, long(kpad), rows * 32.0 * kpad / best / 1e9);
  }
}
