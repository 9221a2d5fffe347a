// AVX2's uniform w7 tile (conv rows: codes in [0, 127], 7-bit weights; library: 8 rows x 8 columns a step)
// against a local 4 rows x 16 columns variant, over M rows x N columns x K as q8_block_tiles runs them.
// g++ -O2 -std=c++20 -mavx2 -mfma -I ../main/csrc w7conv.cc ../main/build/cpp/libzenith_core.a -o w7conv
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;
static inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
static inline __m256i sc(const uint8_t* p) { return _mm256_xor_si256(loadu(p), _mm256_set1_epi8(char(0x80))); }
static inline void pin(__m256i& a, __m256i& b, __m256i& c, __m256i& d, __m256i& e, __m256i& f, __m256i& g, __m256i& h) {
  __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d), "+x"(e), "+x"(f), "+x"(g), "+x"(h));
}
template <int MR>
__attribute__((noinline)) void t416(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy, int nvalid) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* q[4];
  for (int r = 0; r < 4; ++r) q[r] = a[std::min(r, MR - 1)].q;
  for (int g = 0; 8 * g < nvalid; g += 2) {
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;
    const uint8_t* wq = wb + 32 * g;
    for (int64_t qq = 0; qq < kpad / 4; qq += 2) {
      pin(s00, s01, s10, s11, s20, s21, s30, s31);
      const __m256i c0 = sc(wq + 128 * qq), c1 = sc(wq + 128 * qq + 32), d0 = sc(wq + 128 * qq + 128), d1 = sc(wq + 128 * qq + 160);
      auto row = [&](const int8_t* x, __m256i& t0, __m256i& t1) {
        int32_t v0, v1;
        std::memcpy(&v0, x + 4 * qq, 4);
        std::memcpy(&v1, x + 4 * qq + 4, 4);
        const __m256i a0 = _mm256_set1_epi32(v0), a1 = _mm256_set1_epi32(v1);
        t0 = _mm256_add_epi32(t0, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(a0, c0), _mm256_maddubs_epi16(a1, d0)), ones));
        t1 = _mm256_add_epi32(t1, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(a0, c1), _mm256_maddubs_epi16(a1, d1)), ones));
      };
      row(q[0], s00, s01);
      if constexpr (MR > 1) row(q[1], s10, s11);
      if constexpr (MR > 2) row(q[2], s20, s21);
      if constexpr (MR > 3) row(q[3], s30, s31);
    }
    const __m256i s[4][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
    for (int r = 0; r < MR; ++r)
      for (int h = 0; h < 2; ++h) {
        const int n = std::min(8, nvalid - 8 * g - 8 * h);
        if (n <= 0) continue;
        const __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s[r][h]), _mm256_set1_ps(a[r].d[0])), _mm256_loadu_ps(ws + 8 * g + 8 * h));
        if (n == 8) _mm256_storeu_ps(y + r * ldy + 8 * g + 8 * h, v);
        else { alignas(32) float t[8]; _mm256_store_ps(t, v); std::memcpy(y + r * ldy + 8 * g + 8 * h, t, 4 * n); }
      }
  }
}
int main(int argc, char** argv) {
  const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  const int64_t kpad = K, nb = N / 32;
  std::vector<uint8_t> w(size_t(nb * kpad * 32));
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t(128 + int(i * 2654435761u >> 24) % 127 - 63);
  std::vector<float> ws(size_t(N), 0.01f), y1(size_t(M * N)), y2(size_t(M * N));
  std::vector<int8_t> q(size_t(M * kpad));
  for (auto& c : q) c = int8_t(rand() % 128);
  std::vector<float> d(size_t(M * kpad / 32), 0.01f);
  std::vector<QActRow> a(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) { a[size_t(r)].q = q.data() + r * kpad; a[size_t(r)].d = d.data() + r * kpad / 32; }
  const QGemmTileFn* lib = q8_gemm_tiles_uniform_w7_avx2();
  auto run = [&](int which, float* y) {
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t m = 0; m < M;) {
        const int R = which == 0 ? 8 : 4, r = int(std::min<int64_t>(R, M - m));
        const uint8_t* wj = w.data() + j * kpad * 32;
        if (which == 0) lib[r - 1](wj, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
        else if (r == 4) t416<4>(wj, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
        else if (r == 2) t416<2>(wj, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
        else t416<1>(wj, ws.data() + 32 * j, kpad, a.data() + m, y + m * N + 32 * j, N, 32);
        m += r;
      }
  };
  run(0, y1.data()); run(1, y2.data());
  double md = 0; for (size_t i = 0; i < y1.size(); ++i) md = std::max(md, (double)std::abs(y1[i] - y2[i]) / (std::abs(y1[i]) + 1e-3));
  double best[2] = {1e30, 1e30};
  for (int rep = 0; rep < 30; ++rep)
    for (int i = 0; i < 2; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run(i, i ? y2.data() : y1.data());
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  std::printf("M %ld N %ld K %ld (max rel diff %.1e): lib 8x8 %.1f GMAC/s, 4x16 %.1f GMAC/s\n", (long)M, (long)N, (long)K, md,
              double(M) * N * K / best[0] / 1e9, double(M) * N * K / best[1] / 1e9);
}
