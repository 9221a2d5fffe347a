// Standalone probe (copies of the AVX2 u8 tile shape, one thread, M=64 rows of one 32-column block): the 2-row x 16-column
// tile with its per-32-value float epilogue (as the library) and without it (int32 over all K: wrong scales, speed only),
// and 4 rows x 16 columns with the float sums in an L1 array or without the epilogue; also K chunks of 512 outside the row
// tiles. g++ -O3 -mavx2 -mfma -std=c++17 u8_epilogue_probe.cc; ./a.out K
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cstdint>
struct Row { const int8_t* q; const float* d; float zshare; };
static inline __m256i loadu(const void* p) { return _mm256_loadu_si256((const __m256i*)p); }
static inline __m256i dacc(__m256i acc, __m256i u, __m256i s) { return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))); }
static inline __m256i d4(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }
#define PIN4(a,b,c,d) __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d))
#define PIN8(a,b,c,d,e,f,g,h) __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d), "+x"(e), "+x"(f), "+x"(g), "+x"(h))

// E1: the library's u8 tile (MR 2 x 16 cols, float accumulators, per-block epilogue)
template <int MR, bool EPI>
__attribute__((noinline)) void t2(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const Row& r0 = a[0]; const Row& r1 = a[MR - 1];
  for (int g = 0; g < 4; g += 2) {
    __m256 f00 = _mm256_setzero_ps(), f01 = f00, f10 = f00, f11 = f00;
    __m256i t00 = _mm256_setzero_si256(), t01 = t00, t10 = t00, t11 = t00;
    for (int64_t b = 0; b < kpad / 32; ++b) {
      __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00;
      if (!EPI) { s00 = t00; s01 = t01; s10 = t10; s11 = t11; }
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
      const int8_t *q0 = r0.q + 32 * b, *q1 = r1.q + 32 * b;
      auto quad = [&](int q, bool first) {
        const __m256i w0 = loadu(wq + 128 * q), w1 = loadu(wq + 128 * q + 32);
        int32_t v; std::memcpy(&v, q0 + 4 * q, 4);
        __m256i av = _mm256_set1_epi32(v);
        s00 = first ? d4(w0, av) : dacc(s00, w0, av);
        s01 = first ? d4(w1, av) : dacc(s01, w1, av);
        if constexpr (MR == 2) {
          std::memcpy(&v, q1 + 4 * q, 4); av = _mm256_set1_epi32(v);
          s10 = first ? d4(w0, av) : dacc(s10, w0, av);
          s11 = first ? d4(w1, av) : dacc(s11, w1, av);
        }
      };
      quad(0, EPI);
#pragma GCC unroll 8
      for (int q = 1; q < 8; ++q) { PIN4(s00, s01, s10, s11); quad(q, false); }
      if (EPI) {
        const float d0 = r0.d[b];
        f00 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s00), _mm256_set1_ps(d0), f00);
        f01 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s01), _mm256_set1_ps(d0), f01);
        if constexpr (MR == 2) {
          const float d1 = r1.d[b];
          f10 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s10), _mm256_set1_ps(d1), f10);
          f11 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s11), _mm256_set1_ps(d1), f11);
        }
      } else { t00 = s00; t01 = s01; t10 = s10; t11 = s11; }
    }
    if (!EPI) { f00 = _mm256_cvtepi32_ps(t00); f01 = _mm256_cvtepi32_ps(t01); f10 = _mm256_cvtepi32_ps(t10); f11 = _mm256_cvtepi32_ps(t11); }
    const __m256 sc0 = _mm256_loadu_ps(ws + 8 * g), sc1 = _mm256_loadu_ps(ws + 8 * g + 8);
    const __m256 zz0 = _mm256_set1_ps(128.f * r0.zshare), zz1 = _mm256_set1_ps(128.f * r1.zshare);
    _mm256_storeu_ps(y + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f00, zz0), sc0));
    _mm256_storeu_ps(y + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f01, zz0), sc1));
    if constexpr (MR == 2) {
      _mm256_storeu_ps(y + ldy + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f10, zz1), sc0));
      _mm256_storeu_ps(y + ldy + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f11, zz1), sc1));
    }
  }
}

// E3: 4 rows x 16 cols, int sums per block, float accumulators in a stack array (memory)
template <bool EPI>
__attribute__((noinline)) void t4(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  for (int g = 0; g < 4; g += 2) {
    alignas(32) float f[8][8] = {};
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (int64_t b = 0; b < kpad / 32; ++b) {
      if (EPI) { s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = _mm256_setzero_si256(); }
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        PIN8(s0, s1, s2, s3, s4, s5, s6, s7);
        const __m256i w0 = loadu(wq + 128 * q), w1 = loadu(wq + 128 * q + 32);
        auto row = [&](int r, __m256i& x0, __m256i& x1) {
          int32_t v; std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
          const __m256i av = _mm256_set1_epi32(v);
          x0 = dacc(x0, w0, av); x1 = dacc(x1, w1, av);
        };
        row(0, s0, s1); row(1, s2, s3); row(2, s4, s5); row(3, s6, s7);
      }
      if (EPI) {
        const __m256i s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
        for (int i = 0; i < 8; ++i)
          _mm256_store_ps(f[i], _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[i]), _mm256_set1_ps(a[i / 2].d[b]), _mm256_load_ps(f[i])));
      }
    }
    const __m256i s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    for (int i = 0; i < 8; ++i) {
      const int r = i / 2, h = i % 2;
      const __m256 v = EPI ? _mm256_load_ps(f[i]) : _mm256_cvtepi32_ps(s[i]);
      _mm256_storeu_ps(y + r * ldy + 8 * g + 8 * h, _mm256_mul_ps(_mm256_sub_ps(v, _mm256_set1_ps(128.f * a[r].zshare)), _mm256_loadu_ps(ws + 8 * g + 8 * h)));
    }
  }
}

template <int KC>
__attribute__((noinline)) void t4chunk_all(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy, int64_t M) {
  // K chunks outside the row tiles: the weight chunk stays in L1 while every row tile passes
  alignas(32) float tmp[4 * 32];
  for (int64_t k0 = 0; k0 < kpad; k0 += KC) {
    const int64_t kc = std::min<int64_t>(KC, kpad - k0);
    for (int64_t m = 0; m < M; m += 4) {
      Row r[4];
      for (int i = 0; i < 4; ++i) r[i] = Row{a[m + i].q + k0, a[m + i].d + k0 / 32, k0 == 0 ? a[m + i].zshare : 0.0f};
      t4<true>(wb + k0 * 32, ws, kc, r, k0 == 0 ? y + m * ldy : tmp, k0 == 0 ? ldy : 32);
      if (k0) for (int i = 0; i < 4; ++i) for (int c = 0; c < 32; ++c) y[(m + i) * ldy + c] += tmp[i * 32 + c];
    }
  }
}
typedef void (*Fn)(const uint8_t*, const float*, int64_t, const Row*, float*, int64_t);
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoi(argv[1]) : 384, M = 64;
  const int reps = 300;
  std::vector<uint8_t> w(K * 32); for (auto& v : w) v = uint8_t((rand() % 255 - 127) ^ 0x80);
  std::vector<float> ws(32, 1.0f), d(M * K / 32, 1.0f);
  std::vector<int8_t> q(M * K); for (auto& v : q) v = rand() % 127 - 63;
  std::vector<Row> a(M);
  for (int m = 0; m < M; ++m) { float z = 0; for (int64_t k = 0; k < K; ++k) z += q[m * K + k]; a[m] = Row{q.data() + m * K, d.data() + m * K / 32, z}; }
  struct V { const char* name; Fn f; int mr; };
  V vs[] = {{"u8 2x16 epi", t2<2, true>, 2}, {"u8 2x16 noepi", t2<2, false>, 2}, {"4x16 memepi", t4<true>, 4}, {"4x16 noepi", t4<false>, 4}};
  const int nv = 4;
  std::vector<std::vector<float>> ys(nv, std::vector<float>(M * 32));
  for (int v = 0; v < nv; ++v) for (int64_t m = 0; m < M; m += vs[v].mr) vs[v].f(w.data(), ws.data(), K, a.data() + m, ys[v].data() + m * 32, 32);
  std::vector<float> yc(M * 32); std::vector<double> tc;
  t4chunk_all<512>(w.data(), ws.data(), K, a.data(), yc.data(), 32, M);
  std::printf("chunked vs E1: %s\n", yc == ys[0] ? "equal" : "DIFFER");
  for (int v = 1; v < nv; ++v) std::printf("%s vs E1: %s\n", vs[v].name, ys[v] == ys[0] ? "equal" : "DIFFER");
  std::vector<std::vector<double>> t(nv);
  for (int round = 0; round < 31; ++round)
    for (int v = 0; v < nv; ++v) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += vs[v].mr) vs[v].f(w.data(), ws.data(), K, a.data() + m, ys[v].data() + m * 32, 32);
      t[v].push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
      if (v == nv - 1) { auto t1 = std::chrono::steady_clock::now(); for (int i = 0; i < reps; ++i) t4chunk_all<512>(w.data(), ws.data(), K, a.data(), yc.data(), 32, M);
        tc.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t1).count()); }
    }
  const double macs = double(reps) * M * 32 * K;
  { auto s = tc; std::sort(s.begin(), s.end()); std::printf("K %ld %-14s %.1f MAC/ns (median)\n", long(K), "4x16 chunk512", macs / s[15]); }
  for (int v = 0; v < nv; ++v) { auto s = t[v]; std::sort(s.begin(), s.end()); std::printf("K %ld %-14s %.1f MAC/ns (median)\n", long(K), vs[v].name, macs / s[15]); }
}
