// AVX2's narrow u8 tile (2 rows x 32 columns a call) alone, hot in L1: per-32 scales (G 1) vs per-64 (G 2).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t kpad = argc > 1 ? atoll(argv[1]) : 384;
  std::vector<uint8_t> w(size_t(kpad * 32), 130);
  std::vector<float> ws(32, 0.01f), y(size_t(2 * 32));
  std::vector<int8_t> q(size_t(2 * kpad), 3);
  std::vector<float> d(size_t(2 * kpad / 32), 0.5f);
  std::vector<QActRow> a(2);
  for (int r = 0; r < 2; ++r) { a[size_t(r)].q = q.data() + r * kpad; a[size_t(r)].d = d.data() + r * kpad / 32; }
  for (int G = 1; G <= 2; ++G) {
    const QGemmTileFn fn = G == 1 ? q8_gemm_tiles_u8_avx2()[1] : q8_gemm_tiles_u8_pairs_avx2(false)[1];
    double best = 1e30;
    for (int rep = 0; rep < 30; ++rep) {
      const int iters = 20000;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) fn(w.data(), ws.data(), kpad, a.data(), y.data(), 32, 32);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
    std::printf("G %d kpad %ld: %.1f ns a tile, %.1f GMAC/s\n", G, (long)kpad, best * 1e9, 2 * 32.0 * kpad / best / 1e9);
  }
}
