// Single-thread A/B of AVX2 narrow int8 tile shapes (7-bit activation codes, weight codes
// + 128) on random packed data: v0 4 rows x 8 columns (01d7654's first form), v1u 2 x 16
// (01d7654), v3 2 x 32, v4 2 x 16 with named accumulators in registers (fb34964).
// g++ -O2 -std=c++17 -march=x86-64-v3 narrow_tile_shapes.cc -o t && ./t M N K
// Single-thread A/B of AVX2 narrow int8 GEMM tile variants on packed data (M x N x K).
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
struct Row { const int8_t* q; const float* d; const int16_t* s16; };
static inline __m256i loadu(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
template <int MR>
__attribute__((noinline)) void v0(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 4; ++g) {
    __m256 f[MR];
    for (int r = 0; r < MR; ++r) f[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < kpad / 32; ++b) {
      __m256i s[MR];
      for (int r = 0; r < MR; ++r) s[r] = _mm256_set1_epi32(-128 * (int32_t(a[r].s16[2 * b]) + a[r].s16[2 * b + 1]));
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
#pragma GCC unroll 1
      for (int q = 0; q < 8; ++q) {
        const __m256i c = loadu(wq + 128 * q);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          int32_t v;
          std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
          s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c, _mm256_set1_epi32(v)), ones));
        }
      }
      for (int r = 0; r < MR; ++r) f[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(a[r].d[b]), f[r]);
    }
    const __m256 sc = _mm256_loadu_ps(ws + 8 * g);
    for (int r = 0; r < MR; ++r) _mm256_storeu_ps(y + r * ldy + 8 * g, _mm256_mul_ps(f[r], sc));
  }
}
// v1: two column groups at once (16 columns), MR rows; int sums for both, float accumulators in memory per block
template <int MR>
__attribute__((noinline)) void v1(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 4; g += 2) {
    alignas(32) float f[MR][16] = {};
    for (int64_t b = 0; b < kpad / 32; ++b) {
      __m256i s0[MR], s1[MR];
      for (int r = 0; r < MR; ++r) s0[r] = s1[r] = _mm256_set1_epi32(-128 * (int32_t(a[r].s16[2 * b]) + a[r].s16[2 * b + 1]));
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
#pragma GCC unroll 1
      for (int q = 0; q < 8; ++q) {
        const __m256i c0 = loadu(wq + 128 * q), c1 = loadu(wq + 128 * q + 32);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          int32_t v;
          std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
          const __m256i av = _mm256_set1_epi32(v);
          s0[r] = _mm256_add_epi32(s0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c0, av), ones));
          s1[r] = _mm256_add_epi32(s1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c1, av), ones));
        }
      }
      for (int r = 0; r < MR; ++r) {
        const __m256 d = _mm256_set1_ps(a[r].d[b]);
        _mm256_store_ps(f[r], _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0[r]), d, _mm256_load_ps(f[r])));
        _mm256_store_ps(f[r] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1[r]), d, _mm256_load_ps(f[r] + 8)));
      }
    }
    for (int r = 0; r < MR; ++r) {
      _mm256_storeu_ps(y + r * ldy + 8 * g, _mm256_mul_ps(_mm256_load_ps(f[r]), _mm256_loadu_ps(ws + 8 * g)));
      _mm256_storeu_ps(y + r * ldy + 8 * g + 8, _mm256_mul_ps(_mm256_load_ps(f[r] + 8), _mm256_loadu_ps(ws + 8 * g + 8)));
    }
  }
}

// v1u: unroll 2; two column groups at once (16 columns), MR rows; int sums for both, float accumulators in memory per block
template <int MR>
__attribute__((noinline)) void v1u(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 4; g += 2) {
    alignas(32) float f[MR][16] = {};
    for (int64_t b = 0; b < kpad / 32; ++b) {
      __m256i s0[MR], s1[MR];
      for (int r = 0; r < MR; ++r) s0[r] = s1[r] = _mm256_set1_epi32(-128 * (int32_t(a[r].s16[2 * b]) + a[r].s16[2 * b + 1]));
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
#pragma GCC unroll 2
      for (int q = 0; q < 8; ++q) {
        const __m256i c0 = loadu(wq + 128 * q), c1 = loadu(wq + 128 * q + 32);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          int32_t v;
          std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
          const __m256i av = _mm256_set1_epi32(v);
          s0[r] = _mm256_add_epi32(s0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c0, av), ones));
          s1[r] = _mm256_add_epi32(s1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c1, av), ones));
        }
      }
      for (int r = 0; r < MR; ++r) {
        const __m256 d = _mm256_set1_ps(a[r].d[b]);
        _mm256_store_ps(f[r], _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0[r]), d, _mm256_load_ps(f[r])));
        _mm256_store_ps(f[r] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1[r]), d, _mm256_load_ps(f[r] + 8)));
      }
    }
    for (int r = 0; r < MR; ++r) {
      _mm256_storeu_ps(y + r * ldy + 8 * g, _mm256_mul_ps(_mm256_load_ps(f[r]), _mm256_loadu_ps(ws + 8 * g)));
      _mm256_storeu_ps(y + r * ldy + 8 * g + 8, _mm256_mul_ps(_mm256_load_ps(f[r] + 8), _mm256_loadu_ps(ws + 8 * g + 8)));
    }
  }
}

// v1f: unroll 8; two column groups at once (16 columns), MR rows; int sums for both, float accumulators in memory per block
template <int MR>
__attribute__((noinline)) void v1f(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 4; g += 2) {
    alignas(32) float f[MR][16] = {};
    for (int64_t b = 0; b < kpad / 32; ++b) {
      __m256i s0[MR], s1[MR];
      for (int r = 0; r < MR; ++r) s0[r] = s1[r] = _mm256_set1_epi32(-128 * (int32_t(a[r].s16[2 * b]) + a[r].s16[2 * b + 1]));
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        const __m256i c0 = loadu(wq + 128 * q), c1 = loadu(wq + 128 * q + 32);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          int32_t v;
          std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
          const __m256i av = _mm256_set1_epi32(v);
          s0[r] = _mm256_add_epi32(s0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c0, av), ones));
          s1[r] = _mm256_add_epi32(s1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(c1, av), ones));
        }
      }
      for (int r = 0; r < MR; ++r) {
        const __m256 d = _mm256_set1_ps(a[r].d[b]);
        _mm256_store_ps(f[r], _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0[r]), d, _mm256_load_ps(f[r])));
        _mm256_store_ps(f[r] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1[r]), d, _mm256_load_ps(f[r] + 8)));
      }
    }
    for (int r = 0; r < MR; ++r) {
      _mm256_storeu_ps(y + r * ldy + 8 * g, _mm256_mul_ps(_mm256_load_ps(f[r]), _mm256_loadu_ps(ws + 8 * g)));
      _mm256_storeu_ps(y + r * ldy + 8 * g + 8, _mm256_mul_ps(_mm256_load_ps(f[r] + 8), _mm256_loadu_ps(ws + 8 * g + 8)));
    }
  }
}

// v2: all 32 columns at once, MR rows (MR <= 2)
template <int MR>
__attribute__((noinline)) void v2(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) float f[MR][32] = {};
  for (int64_t b = 0; b < kpad / 32; ++b) {
    __m256i s[MR][4];
    for (int r = 0; r < MR; ++r) s[r][0] = s[r][1] = s[r][2] = s[r][3] = _mm256_set1_epi32(-128 * (int32_t(a[r].s16[2 * b]) + a[r].s16[2 * b + 1]));
    const uint8_t* wq = wb + b * 8 * 128;
#pragma GCC unroll 1
    for (int q = 0; q < 8; ++q) {
      __m256i c[4];
      for (int i = 0; i < 4; ++i) c[i] = loadu(wq + 128 * q + 32 * i);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t v;
        std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
        const __m256i av = _mm256_set1_epi32(v);
        for (int i = 0; i < 4; ++i) s[r][i] = _mm256_add_epi32(s[r][i], _mm256_madd_epi16(_mm256_maddubs_epi16(c[i], av), ones));
      }
    }
    for (int r = 0; r < MR; ++r) {
      const __m256 d = _mm256_set1_ps(a[r].d[b]);
      for (int i = 0; i < 4; ++i) _mm256_store_ps(f[r] + 8 * i, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][i]), d, _mm256_load_ps(f[r] + 8 * i)));
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(y + r * ldy + 8 * i, _mm256_mul_ps(_mm256_load_ps(f[r] + 8 * i), _mm256_loadu_ps(ws + 8 * i)));
}

// v3: 32 columns x 2 rows, named accumulators
__attribute__((noinline)) void v3_2(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) float f[2][32] = {};
  for (int64_t b = 0; b < kpad / 32; ++b) {
    const __m256i z0 = _mm256_set1_epi32(-128 * (int32_t(a[0].s16[2 * b]) + a[0].s16[2 * b + 1]));
    const __m256i z1 = _mm256_set1_epi32(-128 * (int32_t(a[1].s16[2 * b]) + a[1].s16[2 * b + 1]));
    __m256i a0 = z0, a1 = z0, a2 = z0, a3 = z0, b0 = z1, b1 = z1, b2 = z1, b3 = z1;
    const uint8_t* wq = wb + b * 8 * 128;
    const int8_t* q0 = a[0].q + 32 * b; const int8_t* q1 = a[1].q + 32 * b;
#pragma GCC unroll 1
    for (int q = 0; q < 8; ++q) {
      const __m256i c0 = loadu(wq + 128 * q), c1 = loadu(wq + 128 * q + 32), c2 = loadu(wq + 128 * q + 64), c3 = loadu(wq + 128 * q + 96);
      int32_t v; std::memcpy(&v, q0 + 4 * q, 4);
      __m256i av = _mm256_set1_epi32(v);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(c0, av), ones));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(c1, av), ones));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(c2, av), ones));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(c3, av), ones));
      std::memcpy(&v, q1 + 4 * q, 4);
      av = _mm256_set1_epi32(v);
      b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(_mm256_maddubs_epi16(c0, av), ones));
      b1 = _mm256_add_epi32(b1, _mm256_madd_epi16(_mm256_maddubs_epi16(c1, av), ones));
      b2 = _mm256_add_epi32(b2, _mm256_madd_epi16(_mm256_maddubs_epi16(c2, av), ones));
      b3 = _mm256_add_epi32(b3, _mm256_madd_epi16(_mm256_maddubs_epi16(c3, av), ones));
    }
    const __m256 d0 = _mm256_set1_ps(a[0].d[b]), d1 = _mm256_set1_ps(a[1].d[b]);
#define ACC(F, S, D) _mm256_store_ps(F, _mm256_fmadd_ps(_mm256_cvtepi32_ps(S), D, _mm256_load_ps(F)))
    ACC(f[0], a0, d0); ACC(f[0] + 8, a1, d0); ACC(f[0] + 16, a2, d0); ACC(f[0] + 24, a3, d0);
    ACC(f[1], b0, d1); ACC(f[1] + 8, b1, d1); ACC(f[1] + 16, b2, d1); ACC(f[1] + 24, b3, d1);
#undef ACC
  }
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(y + r * ldy + 8 * i, _mm256_mul_ps(_mm256_load_ps(f[r] + 8 * i), _mm256_loadu_ps(ws + 8 * i)));
}

// v4: 2 rows x 16 columns, named accumulators; float accumulators in registers; zero-point share in float at the end
template <bool FREG>
__attribute__((noinline)) void v4_2(const uint8_t* wb, const float* ws, int64_t kpad, const Row* a, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int g = 0; g < 4; g += 2) {
    __m256 f00 = _mm256_setzero_ps(), f01 = f00, f10 = f00, f11 = f00;
    float c0 = 0, c1 = 0;
    const int8_t* q0 = a[0].q; const int8_t* q1 = a[1].q;
    for (int64_t b = 0; b < kpad / 32; ++b) {
      __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00;
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
#pragma GCC unroll 2
      for (int q = 0; q < 8; ++q) {
        const __m256i w0 = loadu(wq + 128 * q), w1 = loadu(wq + 128 * q + 32);
        int32_t v; std::memcpy(&v, q0 + 32 * b + 4 * q, 4);
        __m256i av = _mm256_set1_epi32(v);
        s00 = _mm256_add_epi32(s00, _mm256_madd_epi16(_mm256_maddubs_epi16(w0, av), ones));
        s01 = _mm256_add_epi32(s01, _mm256_madd_epi16(_mm256_maddubs_epi16(w1, av), ones));
        std::memcpy(&v, q1 + 32 * b + 4 * q, 4);
        av = _mm256_set1_epi32(v);
        s10 = _mm256_add_epi32(s10, _mm256_madd_epi16(_mm256_maddubs_epi16(w0, av), ones));
        s11 = _mm256_add_epi32(s11, _mm256_madd_epi16(_mm256_maddubs_epi16(w1, av), ones));
      }
      const float e0 = a[0].d[b], e1 = a[1].d[b];
      c0 += e0 * float(int32_t(a[0].s16[2 * b]) + a[0].s16[2 * b + 1]);
      c1 += e1 * float(int32_t(a[1].s16[2 * b]) + a[1].s16[2 * b + 1]);
      const __m256 d0 = _mm256_set1_ps(e0), d1 = _mm256_set1_ps(e1);
      f00 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s00), d0, f00);
      f01 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s01), d0, f01);
      f10 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s10), d1, f10);
      f11 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s11), d1, f11);
    }
    const __m256 z0 = _mm256_set1_ps(128.0f * c0), z1 = _mm256_set1_ps(128.0f * c1);
    const __m256 sc0 = _mm256_loadu_ps(ws + 8 * g), sc1 = _mm256_loadu_ps(ws + 8 * g + 8);
    _mm256_storeu_ps(y + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f00, z0), sc0));
    _mm256_storeu_ps(y + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f01, z0), sc1));
    _mm256_storeu_ps(y + ldy + 8 * g, _mm256_mul_ps(_mm256_sub_ps(f10, z1), sc0));
    _mm256_storeu_ps(y + ldy + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(f11, z1), sc1));
  }
}
using Fn = void (*)(const uint8_t*, const float*, int64_t, const Row*, float*, int64_t);
int main(int argc, char** argv) {
  const int64_t M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), kpad = (K + 31) / 32 * 32, nb = (N + 31) / 32;
  std::mt19937 rng(1);
  std::vector<uint8_t> w(nb * kpad * 32);
  for (auto& v : w) v = uint8_t(rng());
  std::vector<float> ws(nb * 32, 0.01f), y(M * N), d(M * kpad / 32, 0.02f);
  std::vector<int8_t> q(M * kpad);
  for (auto& v : q) v = int8_t(int(rng() % 127) - 63);
  std::vector<int16_t> s16(M * kpad / 16);
  for (int64_t i = 0; i < M * kpad / 16; ++i) { int s = 0; for (int j = 0; j < 16; ++j) s += q[16 * i + j]; s16[i] = s; }
  auto run = [&](Fn* fns, int mr) {
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t m = 0; m < M; m += mr) {
        const int r = std::min<int64_t>(mr, M - m);
        Row rows[8];
        for (int i = 0; i < r; ++i) rows[i] = {q.data() + (m + i) * kpad, d.data() + (m + i) * kpad / 32, s16.data() + (m + i) * kpad / 16};
        fns[r - 1](w.data() + j * kpad * 32, ws.data() + 32 * j, kpad, rows, y.data() + m * N + 32 * j, N);
      }
  };
  Fn a4[] = {v0<1>, v0<2>, v0<3>, v0<4>};
  Fn a6[] = {v0<1>, v0<2>, v0<3>, v0<4>, v0<5>, v0<6>};
  Fn b2[] = {v1<1>, v1<2>};
  Fn b3[] = {v1<1>, v1<2>, v1<3>};
  Fn c1[] = {v2<1>};
  Fn c2[] = {v2<1>, v2<2>};
  Fn u2[] = {v1u<1>, v1u<2>};
  Fn f2[] = {v1f<1>, v1f<2>};
  Fn u3[] = {v1u<1>, v1u<2>, v1u<3>};
  Fn d2[] = {v2<1>, v3_2};
  Fn e2[] = {v1u<1>, v4_2<true>};
  struct V { const char* name; Fn* f; int mr; } vs[] = {{"v0 MR4", a4, 4}, {"v1u MR2", u2, 2}, {"v4 regs MR2", e2, 2}};
  const int nv = 3;
  std::vector<double> t[nv];
  std::vector<float> ref;
  for (int round = 0; round < 15; ++round)
    for (int v = 0; v < nv; ++v) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 3; ++i) run(vs[v].f, vs[v].mr);
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3);
      if (round == 0 && v == 0) ref = y;
      if (round == 0 && v) for (size_t i = 0; i < y.size(); ++i) if (std::abs(y[i] - ref[i]) > 1e-3f * (1 + std::abs(ref[i]))) { printf("%s differs at %zu\n", vs[v].name, i); break; }
    }
  for (int v = 0; v < nv; ++v) {
    std::sort(t[v].begin(), t[v].end());
    std::vector<double> r;
    printf("%-14s %.3f ms  %.1f Gop/s\n", vs[v].name, t[v][7] * 1e3, 2.0 * M * N * K / t[v][7] / 1e9);
  }
}
