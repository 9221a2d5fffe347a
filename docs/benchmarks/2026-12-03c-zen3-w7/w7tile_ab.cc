// one thread, in L1: AVX2's uniform nonneg int8 tile (library) against a local tile for weights within +-63
// (two quads' maddubs pairs summed in int16 before one madd); MAC/ns
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
static inline void store_first(float* p, __m256 v, int n) { if (n == 8) { _mm256_storeu_ps(p, v); return; } alignas(32) float t[8]; _mm256_store_ps(t, v); std::memcpy(p, t, size_t(n) * 4); }
template <int MR>
void tile_w7(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy, int nvalid) {
  const __m256i flip = _mm256_set1_epi8(char(0x80)), ones = _mm256_set1_epi16(1);
  for (int g = 0; 8 * g < nvalid; ++g) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    const uint8_t* wq = wb + 32 * g;
    for (int64_t q = 0; q < kpad / 4; q += 2) {
      const __m256i c0 = _mm256_xor_si256(loadu(wq + 128 * q), flip), c1 = _mm256_xor_si256(loadu(wq + 128 * q + 128), flip);
      const auto row = [&](__m256i& acc, int r) {
        int32_t v0, v1;
        std::memcpy(&v0, a[r].q + 4 * q, 4);
        std::memcpy(&v1, a[r].q + 4 * q + 4, 4);
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(v0), c0),
                                           _mm256_maddubs_epi16(_mm256_set1_epi32(v1), c1));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
      };
      row(s0, 0);
      if constexpr (MR > 1) row(s1, 1);
      if constexpr (MR > 2) row(s2, 2);
      if constexpr (MR > 3) row(s3, 3);
      if constexpr (MR > 4) row(s4, 4);
      if constexpr (MR > 5) row(s5, 5);
      if constexpr (MR > 6) row(s6, 6);
      if constexpr (MR > 7) row(s7, 7);
      __asm__("" : "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3), "+x"(s4), "+x"(s5), "+x"(s6), "+x"(s7));
    }
    const int n = std::min(8, nvalid - 8 * g);
    const __m256 sc = _mm256_loadu_ps(ws + 8 * g);
    const __m256i s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    for (int r = 0; r < MR; ++r) {
      const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(a[r].d[0]));
      store_first(y + r * ldy + 8 * g, _mm256_mul_ps(v, sc), n);
    }
  }
}
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoi(argv[1]) : 576, M = argc > 2 ? atoi(argv[2]) : 64;
  const int reps = 200;
  // packed layout: codes + 128, (k/4)*128 + c*4 + k%4 within a block of 32 columns
  std::vector<uint8_t> w(K * 32); for (auto& v : w) v = uint8_t((rand() % 127 - 63) ^ 0x80);
  for (int i = 0; i < 64; ++i) w[i] = uint8_t(int8_t(i % 2 ? 63 : -63) ^ 0x80);  // extremes
  std::vector<float> ws(32); for (auto& v : ws) v = 0.001f * (rand() % 100 + 1);
  std::vector<float> d(M); for (auto& v : d) v = 0.01f * (rand() % 100 + 1);
  std::vector<float> y1(M * 32), y2(M * 32);
  std::vector<int8_t> q(M * K); for (auto& v : q) v = rand() % 128;
  for (int i = 0; i < 64; ++i) q[i] = 127;
  std::vector<int16_t> s16(M * K / 16);
  std::vector<QActRow> a(M);
  for (int m = 0; m < M; ++m) { a[m] = QActRow{q.data() + m * K, d.data() + m, s16.data() + m * K / 16, nullptr}; a[m].total = 0; }
  const QGemmTileFn* t = q8_gemm_tiles_uniform_nonneg_avx2();
  for (int64_t m = 0; m < M; m += 8) { t[7](w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32); tile_w7<8>(w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32); }
  std::printf("%s\n", std::memcmp(y1.data(), y2.data(), y1.size() * 4) == 0 ? "bit-identical" : "DIFFER");
  std::vector<double> r; double to = 0, tn = 0;
  for (int round = 0; round < 41; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 8) t[7](w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32);
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 8) tile_w7<8>(w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32);
    auto t2 = std::chrono::steady_clock::now();
    double a_ = std::chrono::duration<double, std::nano>(t1 - t0).count(), b_ = std::chrono::duration<double, std::nano>(t2 - t1).count();
    r.push_back(b_ / a_); to += a_; tn += b_;
  }
  std::sort(r.begin(), r.end());
  const double macs = 41.0 * reps * M * 32 * K;
  std::printf("K %ld: nonneg %.1f MAC/ns, w7 %.1f; w7/nonneg time median %.3f [%.3f, %.3f] (10th-90th)\n", long(K), macs / to, macs / tn, r[20], r[4], r[36]);
}
