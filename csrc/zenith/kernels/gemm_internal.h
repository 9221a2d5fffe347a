// GEMM building blocks shared by the GEMM driver (gemm.cc) and the fused attention
// kernel (attention.cc): per-thread packing buffers, the panel packers and the
// register-tile micro-kernels. Internal to the kernels; not part of kernels.h.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "zenith/error.h"

namespace zenith::gemm_detail {

struct AlignedBuf {
  float* p = nullptr;
  size_t n = 0;
  ~AlignedBuf() { std::free(p); }
  // Gives the memory back when it grew past `limit` floats, so one huge GEMM does not
  // pin its packing buffer for the life of the thread.
  void trim(size_t limit) {
    if (n > limit) {
      std::free(p);
      p = nullptr;
      n = 0;
    }
  }
  float* get(size_t want) {
    if (want > n) {
      std::free(p);
      // The size is recorded only once the memory exists: after a failed allocation
      // the buffer is empty, not a null pointer claiming `want` floats.
      n = 0;
      p = static_cast<float*>(std::aligned_alloc(64, ((want * sizeof(float)) + 63) / 64 * 64));
      if (!p) fail_alloc("zenith kernel scratch: out of memory allocating ", want * sizeof(float), " bytes");
      n = want;
    }
    return p;
  }
};

#if defined(__AVX2__)
// dst[k * ld + j] = src[j * src_stride + k] for an 8 x 8 block (j rows of W, k along
// each row): the standard unpack / shuffle / lane-permute transpose in registers.
inline void transpose_8x8(const float* src, int64_t src_stride, float* dst, int64_t ld) {
  __m256 r[8], t[8], u[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * src_stride);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
    u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
    u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
    u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * ld, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
    _mm256_storeu_ps(dst + (k + 4) * ld, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
  }
}
#endif

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: 8 x 8 blocks through
// registers where there are whole ones, the edges one value at a time (along src's
// rows, so no loop walks a column of src).
inline void transpose_block(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, int64_t cols) {
  int64_t r8 = 0;
#if defined(__AVX2__)
  r8 = rows / 8 * 8;
  const int64_t c8 = cols / 8 * 8;
  for (int64_t r0 = 0; r0 < r8; r0 += 8) {
    for (int64_t c0 = 0; c0 < c8; c0 += 8) transpose_8x8(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd);
    for (int64_t r = r0; r < r0 + 8; ++r)
      for (int64_t c = c8; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
  }
#endif
  for (int64_t r = r8; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// kc x NR panel of B, zero-padded past nr.
template <int64_t NR>
inline void pack_b(int64_t kc, int64_t nr, const float* b, int64_t b_rs, int64_t b_cs, float* dst) {
  if (b_rs == 1 && b_cs != 1) {  // B^T row-major (W of nn.Linear): transpose while packing
    int64_t j0 = 0;
#if defined(__AVX2__)
    int64_t k8 = kc / 8 * 8;
    for (; j0 + 8 <= nr; j0 += 8) {
      for (int64_t k0 = 0; k0 < k8; k0 += 8) transpose_8x8(b + j0 * b_cs + k0, b_cs, dst + k0 * NR + j0, NR);
      for (int64_t k = k8; k < kc; ++k)
        for (int64_t j = j0; j < j0 + 8; ++j) dst[k * NR + j] = b[j * b_cs + k];
    }
#endif
    for (int64_t k = 0; k < kc; ++k) {  // the last columns (< 8) and the zero padding
      float* d = dst + k * NR;
      for (int64_t j = j0; j < NR; ++j) d[j] = j < nr ? b[j * b_cs + k] : 0.0f;
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = b + k * b_rs;
    float* d = dst + k * NR;
    if (nr == NR && b_cs == 1) {
      std::memcpy(d, src, NR * sizeof(float));
    } else {
      int64_t j = 0;
      for (; j < nr; ++j) d[j] = src[j * b_cs];
      for (; j < NR; ++j) d[j] = 0;
    }
  }
}

// MR x kc panel of A (times alpha), k-major, zero-padded past mr.
template <int64_t MR>
inline void pack_a(int64_t kc, int64_t mr, float alpha, const float* a, int64_t a_rs, int64_t a_cs, float* dst) {
  if (mr == MR && a_rs == 1) {  // A^T row-major (dW = dy^T x in backward): MR contiguous values per k
    for (int64_t k = 0; k < kc; ++k)
      for (int64_t r = 0; r < MR; ++r) dst[k * MR + r] = alpha * a[k * a_cs + r];
    return;
  }
#if defined(__AVX2__)
  if (mr == MR && MR % 8 == 0 && a_cs == 1 && kc % 8 == 0) {  // row-major A: 8 x 8 register transposes
    for (int64_t r0 = 0; r0 < MR; r0 += 8)
      for (int64_t k0 = 0; k0 < kc; k0 += 8) transpose_8x8(a + r0 * a_rs + k0, a_rs, dst + k0 * MR + r0, MR);
    if (alpha != 1.0f)
      for (int64_t i = 0; i < kc * MR; ++i) dst[i] *= alpha;
    return;
  }
#endif
  for (int64_t k = 0; k < kc; ++k) {
    float* d = dst + k * MR;
    int64_t r = 0;
    for (; r < mr; ++r) d[r] = alpha * a[r * a_rs + k * a_cs];
    for (; r < MR; ++r) d[r] = 0;
  }
}

// Writes (or adds) an MR x NR register tile held in `tmp` to C, clipped to mr x nr.
template <int64_t MR, int64_t NR>
inline void store_partial(const float (&tmp)[MR][NR], float* c, int64_t ldc, int64_t mr, int64_t nr, bool add) {
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j) c[r * ldc + j] = add ? c[r * ldc + j] + tmp[r][j] : tmp[r][j];
}

// ---- x86-64-v3 (AVX2 + FMA) micro-kernel: 6 x 16, 12 ymm accumulators ----
typedef float v8f __attribute__((vector_size(32)));
inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }

// The 6 x (8 * NV) tile over kc steps of k: A's value for row r at step k is a(k, r)
// (how A is laid out is the caller's), B's columns at bp + k * 16 (a 16-wide panel;
// NV = 1 uses its first 8 columns).
template <int NV = 2, class AAt>
void uk_6x16_avx2_tile(int64_t kc, AAt a, const float* bp, float* c, int64_t ldc, int64_t mr, int64_t nr, bool add) {
  constexpr int MR = 6, NR = 8 * NV, KS = 16;
  v8f acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = v8f{};
  for (int64_t k = 0; k < kc; ++k) {
    v8f b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load8(bp + k * KS + 8 * v);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      float x = a(k, r);
      v8f av = v8f{x, x, x, x, x, x, x, x};
      for (int v = 0; v < NV; ++v) acc[r][v] += av * b[v];
    }
  }
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) {
        float* cr = c + r * ldc + 8 * v;
        store8(cr, add ? load8(cr) + acc[r][v] : acc[r][v]);
      }
    return;
  }
  alignas(64) float tmp[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) store8(tmp[r] + 8 * v, acc[r][v]);
  store_partial<MR, NR>(tmp, c, ldc, mr, nr, add);
}

// A packed: row r of k at ap[k * KS + r]. KS = 6 is sgemm's packed panel; the
// attention kernel passes its transposed probability tile (KS = 16 query rows per k).
// NV = 1: the first 8 columns of B's panel (a last panel with at most 8 columns).
template <int KS = 6, int NV = 2>
void uk_f32_gemm_6x16_avx2(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int64_t mr,
                           int64_t nr, bool add) {
  uk_6x16_avx2_tile<NV>(kc, [ap](int64_t k, int r) { return ap[k * KS + r]; }, bp, c, ldc, mr, nr, add);
}

// A read in place: row r at w + r * ldw, contiguous along k (an nn.Linear weight as
// the left operand of C^T = W X^T). Rows from mr on read row 0 and are not stored, so a
// last, short panel reads nothing past W. NV = 1: the first 8 columns of B's panel
// (a last panel of X^T with at most 8 columns).
template <int NV>
void uk_f32_gemm_6x16_rows_avx2(int64_t kc, const float* w, int64_t ldw, const float* bp, float* c, int64_t ldc,
                                int64_t mr, int64_t nr, bool add) {
  const float* row[6];
  for (int r = 0; r < 6; ++r) row[r] = w + (r < mr ? r : 0) * ldw;
  uk_6x16_avx2_tile<NV>(kc, [&row](int64_t k, int r) { return row[r][k]; }, bp, c, ldc, mr, nr, add);
}

// ---- AVX-512 micro-kernel: MR x (16 * NV), chosen at run time ----
// Run as 8 x 32 (16 zmm accumulators). 8 x 48 was 1.5x faster in an isolated kernel
// loop here but made no measurable difference inside BERT or ResNet-50, and pads small
// column counts (ResNet's 7 x 7 maps: 49 columns) more.
#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f")
typedef float v16f __attribute__((vector_size(64)));

// The MR x (16 * NV) tile over kc steps of k: A's value for row r at step k is a(k, r)
// (how A is laid out is the caller's), B's columns at bp + k * BS (a BS-wide panel; NV
// = 1 in a 32-wide panel uses its first 16 columns).
template <int MR, int NV, int BS, class AAt>
inline void uk_avx512_tile(int64_t kc, AAt a, const float* bp, float* c, int64_t ldc, int64_t mr, int64_t nr,
                           bool add) {
  constexpr int NR = 16 * NV;
  v16f acc[MR][NV];  // every loop over r and v is unrolled so acc stays in registers
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = v16f{};
  for (int64_t k = 0; k < kc; ++k) {
    v16f b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) std::memcpy(&b[v], bp + k * BS + 16 * v, 64);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      float x = a(k, r);
      v16f av = v16f{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};  // vbroadcastss from memory
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += av * b[v];
    }
  }
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; ++r) {
      float* cr = c + r * ldc;
      for (int v = 0; v < NV; ++v) {
        v16f o = acc[r][v];
        if (add) {
          v16f old;
          std::memcpy(&old, cr + 16 * v, 64);
          o += old;
        }
        std::memcpy(cr + 16 * v, &o, 64);
      }
    }
    return;
  }
  alignas(64) float tmp[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) std::memcpy(tmp[r] + 16 * v, &acc[r][v], 64);
  store_partial<MR, NR>(tmp, c, ldc, mr, nr, add);
}

// A as in the AVX2 kernel: row r of k at ap[k * KS + r]; B's panel BS wide.
template <int MR, int NV, int KS = MR, int BS = 16 * NV>
void uk_f32_gemm_avx512(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int64_t mr, int64_t nr,
                        bool add) {
  uk_avx512_tile<MR, NV, BS>(kc, [ap](int64_t k, int r) { return ap[k * KS + r]; }, bp, c, ldc, mr, nr, add);
}

// A read in place, as uk_f32_gemm_6x16_rows_avx2: row r at w + r * ldw, contiguous
// along k; rows from mr on read row 0 and are not stored. B's panel is 32 wide; NV = 1
// computes its first 16 columns (a last panel with at most 16).
template <int MR, int NV>
void uk_f32_gemm_avx512_rows(int64_t kc, const float* w, int64_t ldw, const float* bp, float* c, int64_t ldc,
                             int64_t mr, int64_t nr, bool add) {
  const float* row[MR];
  for (int r = 0; r < MR; ++r) row[r] = w + (r < mr ? r : 0) * ldw;
  uk_avx512_tile<MR, NV, 32>(kc, [&row](int64_t k, int r) { return row[r][k]; }, bp, c, ldc, mr, nr, add);
}
#pragma GCC pop_options
#endif

using MicroKernel = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, int64_t, bool);
// A micro-kernel reading A's rows in place (row stride ldw) instead of a packed panel.
using RowsMicroKernel = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t, int64_t, bool);

}  // namespace zenith::gemm_detail
