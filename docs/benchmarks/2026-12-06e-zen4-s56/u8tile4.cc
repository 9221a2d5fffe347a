// AVX2's narrow u8 pair tiles over a whole row chunk and many column blocks, as q8_block_tiles runs them:
// one thread, M rows x N columns x K, the library's tiles of 2 rows and of 4 rows (tiles[1], tiles[3]); the
// outputs compared, then the best of 40 alternated sweeps. W7=1: 7-bit weight codes, the w7 tiles.
// (The "before" figures in outputs.txt came from this file built against the library before 5b0275e, with a
// local draft of the 4-row tile, since moved into quant_avx2.cc and removed from here.)
// ./u8tile4 M N K
// g++ -O2 -std=c++20 -mavx2 -mfma -I ../main/csrc u8tile4.cc ../main/build/cpp/libzenith_core.a -o u8tile4 -lpthread
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;

int main(int argc, char** argv) {
  const int64_t M = argc > 1 ? atoll(argv[1]) : 128, N = argc > 2 ? atoll(argv[2]) : 1536, K = argc > 3 ? atoll(argv[3]) : 768;
  const int64_t kpad = K, nb = N / 32;
  std::vector<uint8_t> w(size_t(nb * kpad * 32));
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t(rand());
  std::vector<float> ws(size_t(N), 0.01f), y1(size_t(M * N)), y2(size_t(M * N));
  std::vector<int8_t> q(size_t(M * kpad));
  for (auto& c : q) c = int8_t(rand() % 127 - 63);
  std::vector<float> d(size_t(M * kpad / 32));
  for (size_t i = 0; i < d.size(); ++i) d[i] = 0.01f + 0.001f * float((i / 2) % 7);
  std::vector<QActRow> a(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) {
    a[size_t(r)].q = q.data() + r * kpad; a[size_t(r)].d = d.data() + r * kpad / 32;
    float z = 0; for (int64_t b = 0; b < kpad / 32; ++b) { int s = 0; for (int i = 0; i < 32; ++i) s += q[size_t(r * kpad + 32 * b + i)]; z += a[size_t(r)].d[b] * float(s); }
    a[size_t(r)].zshare = z;
  }
  const bool W7 = getenv("W7") != nullptr;
  if (W7) for (auto& c : w) c = uint8_t(128 + (int(c) % 127) - 63);
  const QGemmTileFn* tiles = q8_gemm_tiles_u8_pairs_avx2(W7);
  auto run = [&](int rows, float* y) {  // tiles of `rows` rows, the last one shorter
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t m = 0; m < M; m += rows) {
        const int r = int(std::min<int64_t>(rows, M - m));
        tiles[r - 1](w.data() + j * kpad * 32, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
      }
  };
  run(2, y1.data()); run(4, y2.data());
  double maxd = 0; for (size_t i = 0; i < y1.size(); ++i) maxd = std::max(maxd, (double)std::abs(y1[i] - y2[i]) / (std::abs(y1[i]) + 1e-3));
  std::printf("M %ld N %ld K %ld: max rel diff %.2e\n", (long)M, (long)N, (long)K, maxd);
  double best[2] = {1e30, 1e30};
  for (int rep = 0; rep < 40; ++rep)
    for (int i = 0; i < 2; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run(i == 0 ? 2 : 4, i == 0 ? y1.data() : y2.data());
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  for (int i = 0; i < 2; ++i) std::printf("  %s: %.3f ms, %.1f GMAC/s\n", i == 0 ? "lib 2-row" : "lib 4-row", best[i] * 1e3, double(M) * N * K / best[i] / 1e9);
}
