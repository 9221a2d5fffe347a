// one thread, in L1: the AVX2 u8 GEMM tile (table) against local variants, interleaved; MAC/ns
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cmath>
#include "zenith/kernels/quant_formats.h"
using namespace zenith; using namespace zenith::quant;
static inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
static inline __m256i dot4(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }
static inline void store_first(float* p, __m256 v, int n) { if (n == 8) { _mm256_storeu_ps(p, v); return; } alignas(32) float t[8]; _mm256_store_ps(t, v); std::memcpy(p, t, size_t(n) * 4); }
#define KEEP(a, b, c, d) __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d))
// variant: a block's 8 quads straight-line; the first quad starts the sums (no zeroing, no add)
template <int MR>
void tile_v(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy, int nvalid) {
  const QActRow& r0 = a[0]; const QActRow& r1 = a[MR - 1];
  for (int g = 0; 8 * g < nvalid; g += 2) {
    __m256 f00 = _mm256_setzero_ps(), f01 = f00, f10 = f00, f11 = f00;
    for (int64_t b = 0; b < kpad / 32; ++b) {
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
      const int8_t *q0 = r0.q + 32 * b, *q1 = r1.q + 32 * b;
      __m256i s00, s01, s10, s11;
      {
        const __m256i w0 = loadu(wq), w1 = loadu(wq + 32);
        int32_t v; std::memcpy(&v, q0, 4); __m256i av = _mm256_set1_epi32(v);
        s00 = dot4(w0, av); s01 = dot4(w1, av);
        std::memcpy(&v, q1, 4); av = _mm256_set1_epi32(v);
        s10 = dot4(w0, av); s11 = dot4(w1, av);
      }
#pragma GCC unroll 8
      for (int q = 1; q < 8; ++q) {
        KEEP(s00, s01, s10, s11);
        const __m256i w0 = loadu(wq + 128 * q), w1 = loadu(wq + 128 * q + 32);
        int32_t v; std::memcpy(&v, q0 + 4 * q, 4); __m256i av = _mm256_set1_epi32(v);
        s00 = _mm256_add_epi32(s00, dot4(w0, av)); s01 = _mm256_add_epi32(s01, dot4(w1, av));
        std::memcpy(&v, q1 + 4 * q, 4); av = _mm256_set1_epi32(v);
        s10 = _mm256_add_epi32(s10, dot4(w0, av)); s11 = _mm256_add_epi32(s11, dot4(w1, av));
      }
      const __m256 d0 = _mm256_set1_ps(r0.d[b]), d1 = _mm256_set1_ps(r1.d[b]);
      f00 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s00), d0, f00);
      f01 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s01), d0, f01);
      f10 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s10), d1, f10);
      f11 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s11), d1, f11);
    }
    const int n0 = std::min(8, nvalid - 8 * g), n1 = std::min(8, nvalid - 8 * g - 8);
    const __m256 sc0 = _mm256_loadu_ps(ws + 8 * g), sc1 = _mm256_loadu_ps(ws + 8 * g + 8);
    const __m256 zz0 = _mm256_set1_ps(128.0f * r0.zshare), zz1 = _mm256_set1_ps(128.0f * r1.zshare);
    store_first(y + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f00, zz0), sc0), n0);
    if (n1 > 0) store_first(y + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f01, zz0), sc1), n1);
    store_first(y + ldy + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f10, zz1), sc0), n0);
    if (n1 > 0) store_first(y + ldy + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f11, zz1), sc1), n1);
  }
}
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoi(argv[1]) : 384, M = argc > 2 ? atoi(argv[2]) : 64;
  const int reps = 400;
  std::vector<uint8_t> w(K * 32); for (auto& v : w) v = rand();
  std::vector<float> ws(32); for (auto& v : ws) v = 0.001f * (rand() % 100 + 1);
  std::vector<float> d(M * K / 32); for (auto& v : d) v = 0.01f * (rand() % 100 + 1);
  std::vector<float> y1(M * 32), y2(M * 32);
  std::vector<int8_t> q(M * K); for (auto& v : q) v = rand() % 127 - 63;
  std::vector<int16_t> s16(M * K / 16);
  std::vector<QActRow> a(M);
  for (int m = 0; m < M; ++m) { a[m] = QActRow{q.data() + m * K, d.data() + m * K / 32, s16.data() + m * K / 16, nullptr}; a[m].zshare = 0.5f * m; }
  const QGemmTileFn* t = q8_gemm_tiles_u8_avx2();
  for (int64_t m = 0; m < M; m += 2) { t[1](w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32); tile_v<2>(w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32); }
  double maxd = 0; for (size_t i = 0; i < y1.size(); ++i) maxd = std::max(maxd, double(std::fabs(y1[i] - y2[i])));
  std::printf("max |old - new| %g (%s)\n", maxd, std::memcmp(y1.data(), y2.data(), y1.size() * 4) == 0 ? "bit-identical" : "differ");
  std::vector<double> r;
  double to = 0, tn = 0;
  for (int round = 0; round < 41; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 2) t[1](w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32);
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 2) tile_v<2>(w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32);
    auto t2 = std::chrono::steady_clock::now();
    double a_ = std::chrono::duration<double, std::nano>(t1 - t0).count(), b_ = std::chrono::duration<double, std::nano>(t2 - t1).count();
    r.push_back(b_ / a_); to += a_; tn += b_;
  }
  std::sort(r.begin(), r.end());
  const double macs = 41.0 * reps * M * 32 * K;
  std::printf("K %ld: old %.1f MAC/ns, new %.1f; new/old time median %.3f [%.3f, %.3f] (10th-90th)\n", long(K), macs / to, macs / tn, r[20], r[4], r[36]);
}
