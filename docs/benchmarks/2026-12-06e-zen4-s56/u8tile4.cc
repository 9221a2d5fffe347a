// AVX2's narrow u8 pair tile over a whole row chunk and many column blocks, as q8_block_tiles runs them:
// one thread, M rows x N columns x K. "lib 2-row" and "lib 4-row" are the library's tiles of 2 and 4 rows
// (tiles[1], tiles[3]); built against the library before 5b0275e, "lib 2x16" was its 2-row tile (the local
// tile4 below was the 4-row draft, since moved into quant_avx2.cc). W7=1: 7-bit weight codes, the w7 tiles.
// ./u8tile4 M N K
// g++ -O2 -std=c++20 -mavx2 -mfma -I ../main/csrc u8tile4.cc ../main/build/cpp/libzenith_core.a -o u8tile4 -lpthread
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;

static inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
static inline void pin(__m256i& a, __m256i& b, __m256i& c, __m256i& d, __m256i& e, __m256i& f, __m256i& g, __m256i& h) {
  __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d), "+x"(e), "+x"(f), "+x"(g), "+x"(h));
}
static inline __m256i dotz(__m256i w, __m256i a, __m256i ones) { return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), ones); }

template <int MR>
__attribute__((noinline)) void tile4(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y,
                                     int64_t ldy, int nvalid) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t nb = kpad / 32;
  const int8_t* q[4];
  for (int r = 0; r < 4; ++r) q[r] = a[r < MR ? r : MR - 1].q;
  for (int g = 0; 8 * g < nvalid; g += 2) {
    alignas(32) float f[4][16] = {};
    for (int64_t b0 = 0; b0 < nb; b0 += 2) {
      const int64_t b1 = std::min(nb, b0 + 2);
      __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
      for (int64_t b = b0; b < b1; ++b) {
        const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
#pragma GCC unroll 8
        for (int qq = 0; qq < 8; ++qq) {
          pin(s00, s01, s10, s11, s20, s21, s30, s31);
          const __m256i w0 = loadu(wq + 128 * qq), w1 = loadu(wq + 128 * qq + 32);
          const int64_t o = 32 * b + 4 * qq;
          int32_t v;
          std::memcpy(&v, q[0] + o, 4);
          __m256i av = _mm256_set1_epi32(v);
          s00 = _mm256_add_epi32(s00, dotz(w0, av, ones));
          s01 = _mm256_add_epi32(s01, dotz(w1, av, ones));
          if constexpr (MR > 1) {
            std::memcpy(&v, q[1] + o, 4);
            av = _mm256_set1_epi32(v);
            s10 = _mm256_add_epi32(s10, dotz(w0, av, ones));
            s11 = _mm256_add_epi32(s11, dotz(w1, av, ones));
          }
          if constexpr (MR > 2) {
            std::memcpy(&v, q[2] + o, 4);
            av = _mm256_set1_epi32(v);
            s20 = _mm256_add_epi32(s20, dotz(w0, av, ones));
            s21 = _mm256_add_epi32(s21, dotz(w1, av, ones));
          }
          if constexpr (MR > 3) {
            std::memcpy(&v, q[3] + o, 4);
            av = _mm256_set1_epi32(v);
            s30 = _mm256_add_epi32(s30, dotz(w0, av, ones));
            s31 = _mm256_add_epi32(s31, dotz(w1, av, ones));
          }
        }
      }
      const __m256i s[4][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
      for (int r = 0; r < MR; ++r) {
        const __m256 d = _mm256_set1_ps(a[r].d[b0]);
        for (int h = 0; h < 2; ++h)
          _mm256_store_ps(f[r] + 8 * h, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][h]), d, _mm256_load_ps(f[r] + 8 * h)));
      }
    }
    for (int r = 0; r < MR; ++r) {
      const __m256 z = _mm256_set1_ps(128.0f * a[r].zshare);
      for (int h = 0; h < 2; ++h) {
        const int n = std::min(8, nvalid - 8 * g - 8 * h);
        if (n <= 0) continue;
        const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_load_ps(f[r] + 8 * h), z), _mm256_loadu_ps(ws + 8 * g + 8 * h));
        if (n == 8) _mm256_storeu_ps(y + r * ldy + 8 * g + 8 * h, v);
        else { alignas(32) float t[8]; _mm256_store_ps(t, v); std::memcpy(y + r * ldy + 8 * g + 8 * h, t, 4 * n); }
      }
    }
  }
}

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
  const QGemmTileFn lib2 = q8_gemm_tiles_u8_pairs_avx2(W7)[1];
  if (W7) for (auto& c : w) c = uint8_t(128 + (int(c) % 127) - 63);
  auto run = [&](int which, float* y) {
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t m = 0; m < M;) {
        const int r = int(std::min<int64_t>(which, M - m));
        if (which >= 10) { const int rr = int(std::min<int64_t>(which - 10, M - m)); q8_gemm_tiles_u8_pairs_avx2(W7)[rr - 1](w.data() + j * kpad * 32, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32); m += rr; continue; }
        if (which == 2) lib2(w.data() + j * kpad * 32, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
        else if (r == 4) tile4<4>(w.data() + j * kpad * 32, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
        else if (r == 2) tile4<2>(w.data() + j * kpad * 32, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
        m += r;
      }
  };
  run(2, y1.data()); run(14, y2.data());
  double maxd = 0; for (size_t i = 0; i < y1.size(); ++i) maxd = std::max(maxd, (double)std::abs(y1[i] - y2[i]) / (std::abs(y1[i]) + 1e-3));
  std::printf("M %ld N %ld K %ld: max rel diff %.2e\n", (long)M, (long)N, (long)K, maxd);
  double best[2] = {1e30, 1e30};
  for (int rep = 0; rep < 40; ++rep)
    for (int i = 0; i < 2; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run(i == 0 ? 12 : 14, i == 0 ? y1.data() : y2.data());
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  for (int i = 0; i < 2; ++i) std::printf("  %s: %.3f ms, %.1f GMAC/s\n", i == 0 ? "lib 2-row" : "lib 4-row", best[i] * 1e3, double(M) * N * K / best[i] / 1e9);
}
