// Single-thread A/B of AVX2's 8-row uniform int8 tile: the sign trick (reading + 128
// codes back with an xor) against activation codes in [0, 127] as maddubs' unsigned
// operand (02a5fd8). g++ -O2 -std=c++17 -march=x86-64-v3 uniform_tile_ab.cc -o u && ./u M N K
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
static inline __m256i loadu(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
template <int MR, bool XOR>
__attribute__((noinline)) void uni(const uint8_t* wb, const float* ws, int64_t kpad, const int8_t* const* aq, const float* d, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 4; ++g) {
    __m256i s[MR];
    for (int r = 0; r < MR; ++r) s[r] = _mm256_setzero_si256();
    const uint8_t* wq = wb + 32 * g;
    for (int64_t q = 0; q < kpad / 4; ++q) {
      __m256i c = loadu(wq + 128 * q);
      if (XOR) c = _mm256_xor_si256(c, _mm256_set1_epi8(char(0x80)));
      const __m256i uc = _mm256_sign_epi8(c, c);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t v;
        std::memcpy(&v, aq[r] + 4 * q, 4);
        const __m256i qx = _mm256_sign_epi8(_mm256_set1_epi32(v), c);
        s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(uc, qx), ones));
      }
    }
    const __m256 sc = _mm256_loadu_ps(ws + 8 * g);
    for (int r = 0; r < MR; ++r) _mm256_storeu_ps(y + r * ldy + 8 * g, _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(d[r])), sc));
  }
}

// activations unsigned (codes 0..127), weights signed: maddubs(act, w)
template <int MR>
__attribute__((noinline)) void uni7(const uint8_t* wb, const float* ws, int64_t kpad, const int8_t* const* aq, const float* d, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 4; ++g) {
    __m256i s[MR];
    for (int r = 0; r < MR; ++r) s[r] = _mm256_setzero_si256();
    const uint8_t* wq = wb + 32 * g;
    for (int64_t q = 0; q < kpad / 4; ++q) {
      const __m256i c = _mm256_xor_si256(loadu(wq + 128 * q), _mm256_set1_epi8(char(0x80)));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t v;
        std::memcpy(&v, aq[r] + 4 * q, 4);
        s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(v), c), ones));
      }
    }
    const __m256 sc = _mm256_loadu_ps(ws + 8 * g);
    for (int r = 0; r < MR; ++r) _mm256_storeu_ps(y + r * ldy + 8 * g, _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(d[r])), sc));
  }
}
int main(int argc, char** argv) {
  const int64_t M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), kpad = (K + 31) / 32 * 32, nb = (N + 31) / 32;
  std::mt19937 rng(1);
  std::vector<uint8_t> w(nb * kpad * 32);
  for (auto& v : w) v = uint8_t(rng());
  std::vector<float> ws(nb * 32, 0.01f), y(M * N), d(M, 0.02f);
  std::vector<int8_t> q(M * kpad);
  for (auto& v : q) v = int8_t(int(rng() % 128));
  std::vector<double> t[2];
  for (int round = 0; round < 21; ++round)
    for (int v = 0; v < 2; ++v) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 3; ++i)
        for (int64_t j = 0; j < nb; ++j)
          for (int64_t m = 0; m + 8 <= M; m += 8) {
            const int8_t* aq[8];
            for (int r = 0; r < 8; ++r) aq[r] = q.data() + (m + r) * kpad;
            (v ? uni7<8> : uni<8, true>)(w.data() + j * kpad * 32, ws.data() + 32 * j, kpad, aq, d.data() + m, y.data() + m * N + 32 * j, N);
          }
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3);
    }
  for (auto& x : t) std::sort(x.begin(), x.end());
  printf("%ldx%ldx%ld uniform MR8: sign trick %.3f ms, u7 %.3f ms, ratio %.3f\n", M, N, K, t[0][10] * 1e3, t[1][10] * 1e3, t[1][10] / t[0][10]);
}
