// AVX2's narrow 4-row pair tile over M rows x N columns x K as q8_block_tiles runs it, with the weight cold
// (one of C copies per call, C x N x K bytes past L3), without and with a software prefetch of the next
// column block's codes spread over the current block's row tiles. One thread.
// g++ -O2 -std=c++20 -mavx2 -mfma -I ../main/csrc u8cold.cc ../main/build/cpp/libzenith_core.a -o u8cold
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]), C = argc > 4 ? atoll(argv[4]) : 40;
  const int64_t kpad = K, nb = N / 32, wbytes = nb * kpad * 32;
  std::vector<uint8_t> w(size_t(C * wbytes));
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t(i * 2654435761u >> 24);
  std::vector<float> ws(size_t(N), 0.01f), y(size_t(M * N));
  std::vector<int8_t> q(size_t(M * kpad));
  for (auto& c : q) c = int8_t(rand() % 127 - 63);
  std::vector<float> d(size_t(M * kpad / 32), 0.01f);
  std::vector<QActRow> a(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) { a[size_t(r)].q = q.data() + r * kpad; a[size_t(r)].d = d.data() + r * kpad / 32; }
  const QGemmTileFn* t = q8_gemm_tiles_u8_pairs_avx2(false);
  int64_t call = 0;
  auto run = [&](bool pf) {
    const uint8_t* wc = w.data() + (call++ % C) * wbytes;
    for (int64_t j = 0; j < nb; ++j) {
      const uint8_t* next = wc + (j + 1) * kpad * 32;
      const int64_t lines = j + 1 < nb ? kpad * 32 / 64 : 0, tiles = (M + 3) / 4;
      for (int64_t m = 0, i = 0; m < M; m += 4, ++i) {
        if (pf)
          for (int64_t l = i * lines / tiles; l < (i + 1) * lines / tiles; ++l) _mm_prefetch((const char*)next + 64 * l, _MM_HINT_T0);
        const int r = int(std::min<int64_t>(4, M - m));
        t[r - 1](wc + j * kpad * 32, ws.data() + 32 * j, kpad, a.data() + m, y.data() + m * N + 32 * j, N, 32);
      }
    }
  };
  std::vector<double> ts[2];
  for (int rep = 0; rep < 3 * C; ++rep)
    for (int pf = 0; pf < 2; ++pf) {
      auto t0 = std::chrono::steady_clock::now();
      run(pf);
      ts[pf].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  for (int pf = 0; pf < 2; ++pf) {
    std::sort(ts[pf].begin(), ts[pf].end());
    const double med = ts[pf][ts[pf].size() / 2];
    std::printf("M %ld N %ld K %ld %s: median %.3f ms, %.1f GMAC/s\n", (long)M, (long)N, (long)K, pf ? "prefetch" : "plain   ", med * 1e3, double(M) * N * K / med / 1e9);
  }
}
