// The uniform 12-row tile alone, hot in L1: GMAC/s on one core against vpdpbusd's rate.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t kpad = argc > 1 ? atoll(argv[1]) : 576;
  const int MR = argc > 2 ? atoi(argv[2]) : 12;
  std::vector<uint8_t> w(size_t(kpad * 32), 130);
  std::vector<float> ws(32, 0.01f), y(size_t(MR * 32));
  std::vector<int8_t> q(size_t(MR * kpad), 3);
  std::vector<float> d(size_t(MR), 0.5f);
  std::vector<QActRow> a(static_cast<size_t>(MR));
  for (int r = 0; r < MR; ++r) { a[size_t(r)].q = q.data() + r * kpad; a[size_t(r)].d = &d[size_t(r)]; a[size_t(r)].total = 5; }
  const QGemmTileFn fn = q8_gemm_tiles_uniform_avx512()[MR - 1];
  double best = 1e30;
  for (int rep = 0; rep < 20; ++rep) {
    const int iters = 20000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) fn(w.data(), ws.data(), kpad, a.data(), y.data(), 32, 32);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    best = std::min(best, s);
  }
  std::printf("MR %d kpad %ld: %.1f ns a tile, %.1f GMAC/s\n", MR, (long)kpad, best * 1e9, MR * 32.0 * kpad / best / 1e9);
}
