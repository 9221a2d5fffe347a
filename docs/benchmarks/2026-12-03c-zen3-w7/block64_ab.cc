// one thread, L1, 2 rows: the u8_w7 tile's block loop with the activation scale per 32 values (QB 8 quads, as the
// library) against per 64 (QB 16): what per-64 activation blocks would save in the tile (speed only; the QB 16
// variant reads the per-32 scales as if per 64, so its results are not compared)
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include "zenith/kernels/quant_formats.h"
using namespace zenith; using namespace zenith::quant;
static inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
static inline void store_first(float* p, __m256 v, int n) { if (n == 8) { _mm256_storeu_ps(p, v); return; } alignas(32) float t[8]; _mm256_store_ps(t, v); std::memcpy(p, t, size_t(n) * 4); }
static inline void keep_in_registers(__m256i& a, __m256i& b, __m256i& c, __m256i& d) { __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d)); }
template <int MR, int QB>
void tile_qb(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy,
                        int nvalid) {
  static_assert(MR == 1 || MR == 2);
  const QActRow& r0 = a[0];
  const QActRow& r1 = a[MR - 1];
  const __m256i off = _mm256_set1_epi8(64), ones = _mm256_set1_epi16(1);
  for (int g = 0; 8 * g < nvalid; g += 2) {  // columns [8g, 8g + 16): bytes [32g, 32g + 64) of each quad
    __m256 f00 = _mm256_setzero_ps(), f01 = f00, f10 = f00, f11 = f00;
    for (int64_t b = 0; b < kpad / (4 * QB); ++b) {
      __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00;
      const uint8_t* wq = wb + b * QB * 128 + 32 * g;
      const int8_t *q0 = r0.q + 4 * QB * b, *q1 = r1.q + 4 * QB * b;
      auto quads = [&](int q) {  // quads q and q + 1
        const __m256i w0 = _mm256_sub_epi8(loadu(wq + 128 * q), off),
                      w1 = _mm256_sub_epi8(loadu(wq + 128 * q + 32), off),
                      v0 = _mm256_sub_epi8(loadu(wq + 128 * q + 128), off),
                      v1 = _mm256_sub_epi8(loadu(wq + 128 * q + 160), off);
        const auto row = [&](const int8_t* qr, __m256i& t0, __m256i& t1) {
          int32_t x0, x1;
          std::memcpy(&x0, qr + 4 * q, 4);
          std::memcpy(&x1, qr + 4 * q + 4, 4);
          const __m256i a0 = _mm256_set1_epi32(x0), a1 = _mm256_set1_epi32(x1);
          t0 = _mm256_add_epi32(t0, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w0, a0),
                                                                       _mm256_maddubs_epi16(v0, a1)), ones));
          t1 = _mm256_add_epi32(t1, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w1, a0),
                                                                       _mm256_maddubs_epi16(v1, a1)), ones));
        };
        row(q0, s00, s01);
        if constexpr (MR == 2) row(q1, s10, s11);
      };
#pragma GCC unroll 8
      for (int q = 0; q < QB; q += 2) {
        keep_in_registers(s00, s01, s10, s11);
        quads(q);
      }
      const float d0 = r0.d[b];
      f00 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s00), _mm256_set1_ps(d0), f00);
      f01 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s01), _mm256_set1_ps(d0), f01);
      if constexpr (MR == 2) {
        const float d1 = r1.d[b];
        f10 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s10), _mm256_set1_ps(d1), f10);
        f11 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s11), _mm256_set1_ps(d1), f11);
      }
    }
    const int n0 = std::min(8, nvalid - 8 * g), n1 = std::min(8, nvalid - 8 * g - 8);
    const __m256 sc0 = _mm256_loadu_ps(ws + 8 * g), sc1 = _mm256_loadu_ps(ws + 8 * g + 8);
    const __m256 zz0 = _mm256_set1_ps(64.0f * r0.zshare), zz1 = _mm256_set1_ps(64.0f * r1.zshare);
    store_first(y + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f00, zz0), sc0), n0);
    if (n1 > 0) store_first(y + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f01, zz0), sc1), n1);
    if constexpr (MR == 2) {
      store_first(y + ldy + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f10, zz1), sc0), n0);
      if (n1 > 0) store_first(y + ldy + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f11, zz1), sc1), n1);
    }
  }
}

int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoi(argv[1]) : 384, M = argc > 2 ? atoi(argv[2]) : 64;
  const int reps = 400;
  std::vector<uint8_t> w(K * 32); for (auto& v : w) v = uint8_t((rand() % 127 - 63) ^ 0x80);
  std::vector<float> ws(32, 0.01f), d(M * K / 32, 1.0f), y1(M * 32), y2(M * 32);
  std::vector<int8_t> q(M * K); for (auto& v : q) v = rand() % 127 - 63;
  std::vector<int16_t> s16(M * K / 16);
  std::vector<QActRow> a(M);
  for (int m = 0; m < M; ++m) a[m] = QActRow{q.data() + m * K, d.data() + m * K / 32, s16.data() + m * K / 16, nullptr};
  const QGemmTileFn* t7 = q8_gemm_tiles_u8_w7_avx2();
  t7[1](w.data(), ws.data(), K, a.data(), y1.data(), 32, 32); tile_qb<2, 8>(w.data(), ws.data(), K, a.data(), y2.data(), 32, 32);
  std::printf("QB 8 local copy %s the library tile\n", std::memcmp(y1.data(), y2.data(), 2 * 32 * 4) == 0 ? "equals" : "DIFFERS FROM");
  std::vector<double> r; double to = 0, tn = 0;
  for (int round = 0; round < 41; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 2) tile_qb<2, 8>(w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32);
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 2) tile_qb<2, 16>(w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32);
    auto t2 = std::chrono::steady_clock::now();
    double a_ = std::chrono::duration<double, std::nano>(t1 - t0).count(), b_ = std::chrono::duration<double, std::nano>(t2 - t1).count();
    r.push_back(b_ / a_); to += a_; tn += b_;
  }
  std::sort(r.begin(), r.end());
  const double macs = 41.0 * reps * M * 32 * K;
  std::printf("K %ld: per 32 %.1f MAC/ns, per 64 %.1f; per-64/per-32 time median %.3f [%.3f, %.3f] (10th-90th)\n", long(K), macs / to, macs / tn, r[20], r[4], r[36]);
}
