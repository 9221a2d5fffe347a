// GEMM building blocks shared by the GEMM driver (gemm.cc) and the fused attention
// kernel (attention.cc): per-thread packing buffers, the panel packers and the
// register-tile micro-kernels. Internal to the kernels; not part of kernels.h.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
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
// The 8 x 8 transpose in registers (unpack / shuffle / lane-permute): on return, lane j
// of r[k] holds what lane k of r[j] held.
inline void transpose_8x8_regs(__m256 (&r)[8]) {
  __m256 t[8], u[8];
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
    r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
  }
}

// dst[k * ld + j] = src[j * src_stride + k] for an 8 x 8 block (j rows of W, k along
// each row).
inline void transpose_8x8(const float* src, int64_t src_stride, float* dst, int64_t ld) {
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * src_stride);
  transpose_8x8_regs(r);
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(dst + k * ld, r[k]);
}

// The first n (< 8) floats of v to d.
inline void store_first(float* d, __m256 v, int64_t n) {
  __m128 part = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(d, part);
    part = _mm256_extractf128_ps(v, 1);
    d += 4;
    n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(d), part);
    part = _mm_movehl_ps(part, part);
    d += 2;
    n -= 2;
  }
  if (n) _mm_store_ss(d, part);
}

// transpose_8x8 of a block with rows < 8 rows of src: dst[k * ld + j] for j < rows.
// (sgemm's weight-rows strips on AVX2 are 6 rows: one value at a time, their transpose
// had cost a fifth of a 128 x 1536 x 384 GEMM.)
inline void transpose_rows_x8(const float* src, int64_t src_stride, int64_t rows, float* dst, int64_t ld) {
  __m256 r[8];
  for (int j = 0; j < 8; ++j) r[j] = j < rows ? _mm256_loadu_ps(src + j * src_stride) : _mm256_setzero_ps();
  transpose_8x8_regs(r);
  for (int k = 0; k < 8; ++k) store_first(dst + k * ld, r[k], rows);
}
#endif

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: 8 x 8 blocks through
// registers where there are whole ones (and blocks of the last 2 to 7 rows, 8 columns
// wide), the edges one value at a time (along src's rows, so no loop walks a column of
// src). The blocks go by 8 rows of src, each across all of its columns; by_dst_rows:
// by 8 rows of dst, each across all of src's rows, so each dst row's run is written
// whole before the next rows' (sgemm's weight-rows strips: rows of C a multiple of 1024
// floats apart share an L1 set, and a run written in pieces, the first piece of every
// row before any second, was fetched into L1 again for each piece). The other callers
// keep src's order (conv2d_int8's write-out, whose src is a chunk of pixels by every
// channel: ResNet-50 static INT8 at batch 1 took 1.015x the time by dst rows on Zen 5,
// paired; batch 8 1.00x).
inline void transpose_block(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, int64_t cols,
                            bool by_dst_rows = false) {
  int64_t rv = 0;  // rows [0, rv) go through the blocks
#if defined(__AVX2__)
  const int64_t c8 = cols / 8 * 8;
  rv = rows % 8 == 1 ? rows - 1 : rows;
  auto block = [&](int64_t r8, int64_t c0) {
    const int64_t n = std::min<int64_t>(8, rv - r8);
    if (n == 8) transpose_8x8(src + r8 * lds + c0, lds, dst + c0 * ldd + r8, ldd);
    else transpose_rows_x8(src + r8 * lds + c0, lds, n, dst + c0 * ldd + r8, ldd);
  };
  auto edge = [&](int64_t r0, int64_t r1) {  // columns past the last whole block, rows [r0, r1)
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c8; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
  };
  if (by_dst_rows) {
    for (int64_t c0 = 0; c0 < c8; c0 += 8)
      for (int64_t r8 = 0; r8 < rv; r8 += 8) block(r8, c0);
    edge(0, rv);
  } else {
    for (int64_t r8 = 0; r8 < rv; r8 += 8) {
      for (int64_t c0 = 0; c0 < c8; c0 += 8) block(r8, c0);
      edge(r8, std::min<int64_t>(r8 + 8, rv));  // while those rows of src are in L1
    }
  }
#endif
  for (int64_t r = rv; r < rows; ++r)
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

// 8 floats as a GCC vector: the skinny kernels' unit (gemm.cc).
typedef float v8f __attribute__((vector_size(32)));
inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }

// ---- The register tile, written once over the vector width ----
// Every function from here to the kernels is always_inline and written with GCC vector
// extensions (no intrinsics): each kernel in gemm_ukernels.def is a function with its
// ISA's target attribute that inlines the tile, so the same source compiles to ymm
// registers for AVX2 and zmm for AVX-512 (and to SSE or NEON on other builds).
#define ZENITH_UK_INLINE __attribute__((always_inline)) inline

// L floats in one register: the tile's vector operations. Vectors go in and out by
// reference: a 16-float vector passed by value to a function compiled without AVX-512
// has another ABI, which GCC warns about even where every call is inlined. No
// operation builds a vector from scalars: GCC splits such a 16-float constructor into
// scalar inserts in a function compiled without AVX-512 (as these are before inlining).
template <int L>
struct F32Vec {
  typedef float V __attribute__((vector_size(4 * L)));
  static ZENITH_UK_INLINE void load(V& v, const float* p) { std::memcpy(&v, p, sizeof v); }
  static ZENITH_UK_INLINE void store(float* p, const V& v) { std::memcpy(p, &v, sizeof v); }
  // acc += x * b, x broadcast to every lane: vbroadcastss (or an FMA's {1to16} operand)
  // and one FMA (GCC contracts the two; -ffp-contract=fast is its default).
  static ZENITH_UK_INLINE void fma(V& acc, float x, const V& b) { acc += x * b; }
};

// The MR x NR tile of C (NR a multiple of L) over kc steps of k, MR * NR / L vector
// accumulators: A's value for row r at step k is a(k, r) (how A is laid out is the
// kernel's), B's columns at bp + k * ldb (NR <= ldb; NR < ldb: the first NR columns;
// ldb is KB for a packed panel, or the row stride of a matrix read in place as panels).
// Every loop over r and v is unrolled so the accumulators stay in registers; the
// edges (mr < MR or nr < NR) go through a tile in memory.
template <int L, int MR, int NR, int KB, class AAt>
ZENITH_UK_INLINE void f32_gemm_tile(int64_t kc, AAt a, const float* bp, int64_t ldb, float* c, int64_t ldc,
                                    int64_t mr, int64_t nr, bool add) {
  using Vec = F32Vec<L>;
  using V = typename Vec::V;
  static_assert(NR % L == 0 && NR <= KB, "the tile is whole vectors of B's panel");
  constexpr int NV = NR / L;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t k = 0; k < kc; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) Vec::load(b[v], bp + k * ldb + L * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const float x = a(k, r);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) Vec::fma(acc[r][v], x, b[v]);
    }
  }
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) {
        float* cr = c + r * ldc + L * v;
        V o = acc[r][v];
        if (add) {
          V old;
          Vec::load(old, cr);
          o += old;
        }
        Vec::store(cr, o);
      }
    return;
  }
  V tmp[MR][NV];  // GCC's vector types alias their element type: read back as floats
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) tmp[r][v] = acc[r][v];
  store_partial<MR, NR>(reinterpret_cast<const float(&)[MR][NR]>(tmp), c, ldc, mr, nr, add);
}

// ---- The kernels: one function per row of gemm_ukernels.def ----
enum class GemmIsa { avx2, avx512 };
enum class GemmA { packed, rows };

constexpr int gemm_lanes(GemmIsa isa) { return isa == GemmIsa::avx512 ? 16 : 8; }
inline const char* gemm_isa_name(GemmIsa isa) { return isa == GemmIsa::avx512 ? "avx512" : "avx2"; }
// Whether this CPU runs the ISA's kernels (the x86-64-v3 baseline build assumes AVX2).
inline bool gemm_isa_supported(GemmIsa isa) {
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return __builtin_cpu_supports("avx512f");
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return isa == GemmIsa::avx2;  // the 8-wide kernels, compiled for this build's vectors
#endif
}

// Whether the float kernels written over the vector width (sgemm's tiles, depthwise,
// GELU) run their AVX-512 build: the CPU has AVX-512 (F, DQ, VL, BW) and
// ZENITH_NO_AVX512 is unset. Read once.
inline bool kernels_use_avx512() {
#if defined(__x86_64__)
  static const bool yes = !std::getenv("ZENITH_NO_AVX512") && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw");
  return yes;
#else
  return false;
#endif
}

// Whether the CPU runs each 512-bit instruction as two 256-bit halves: AMD family 19h
// with AVX-512 is Zen 4 (Zen 3, the same family, has none), so a zmm FMA does no more
// work per cycle than a ymm one there. Read once.
inline bool avx512_in_halves() {
#if defined(__x86_64__)
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u)  // "AuthenticAMD"
      return false;
    __get_cpuid(1, &a, &b, &c, &d);
    const unsigned family = ((a >> 8) & 0xF) + ((a >> 8 & 0xF) == 0xF ? (a >> 20) & 0xFF : 0);
    return family == 0x19 && __builtin_cpu_supports("avx512f");
  }();
  return yes;
#else
  return false;
#endif
}

#if defined(__x86_64__)
#define ZENITH_UK_TARGET_avx2 __attribute__((target("avx2,fma")))
#define ZENITH_UK_TARGET_avx512 __attribute__((target("avx512f")))
#else
#define ZENITH_UK_TARGET_avx2
#endif

// A packed kernel: (kc, ap, bp, c, ldc, mr, nr, add); a rows kernel reads A in place:
// (kc, w, ldw, bp, ldb, c, ldc, mr, nr, add, ahead), B's rows ldb apart (KB for a packed
// panel, which the kernel then steps by as a constant; the weight-rows GEMM reads some
// X^T in place, ldb its row stride). mr <= MR, nr <= NR; add: C += the tile.
// ahead: 0, or how many floats past its own each row's values for the next tile are
// (that tile's rows, MR * ldw on), which the kernel prefetches (prefetch_rows_ahead).
using MicroKernel = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, int64_t, bool);
using RowsMicroKernel = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                                 int64_t, bool, int64_t);

// A rows kernel's prefetch at step k: one cache line, of row k % 16 (where the tile has
// that row: MR of every 16 steps ask) at k + ahead. Over 16 steps every row's next 16
// values are asked for once, so a k block of the next tile's rows arrives spread over
// this tile's work, at most one request per step (a burst of requests before the tile
// stalled its loads instead).
template <int MR>
ZENITH_UK_INLINE void prefetch_rows_ahead(const float* const (&row)[MR], int64_t k, int64_t ahead) {
  static_assert(MR <= 16, "one row per step of 16");
  const int64_t r = k & 15;
  if (r < MR) __builtin_prefetch(row[r] + k + ahead, 0, 3);
}

// A rows kernel's tile: A's MR rows in place, the next tile's rows prefetched `ahead`
// floats on (0: none), B's rows `ldb` apart (an int64_t, or a std::integral_constant for
// a packed panel's constant width). Always inlined into the kernel, so it is compiled
// for the kernel's ISA (a lambda there would be a function of its own, built for the
// file's baseline ISA: AVX-512's 16-float vectors then ran some 30x slower).
template <int L, int MR, int NR, int KB, class Stride>
ZENITH_UK_INLINE void rows_tile(int64_t kc, const float* const (&row)[MR], int64_t ahead, const float* bp, Stride ldb,
                                float* c, int64_t ldc, int64_t mr, int64_t nr, bool add) {
  if (ahead == 0) {
    f32_gemm_tile<L, MR, NR, KB>(kc, [&row](int64_t k, int r) { return row[r][k]; }, bp, int64_t(ldb), c, ldc, mr, nr,
                                 add);
    return;
  }
  f32_gemm_tile<L, MR, NR, KB>(
      kc,
      [&row, ahead](int64_t k, int r) {
        if (r == 0) prefetch_rows_ahead<MR>(row, k, ahead);
        return row[r][k];
      },
      bp, int64_t(ldb), c, ldc, mr, nr, add);
}

#define ZENITH_UK_DEFINE_packed(name, isa, MR, NR, KA, KB)                                                        \
  ZENITH_UK_TARGET_##isa inline void name(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,     \
                                          int64_t mr, int64_t nr, bool add) {                                    \
    f32_gemm_tile<gemm_lanes(GemmIsa::isa), MR, NR, KB>(                                                         \
        kc, [ap](int64_t k, int r) { return ap[k * KA + r]; }, bp, KB, c, ldc, mr, nr, add);                     \
  }
#define ZENITH_UK_DEFINE_rows(name, isa, MR, NR, KA, KB)                                                          \
  ZENITH_UK_TARGET_##isa inline void name(int64_t kc, const float* w, int64_t ldw, const float* bp, int64_t ldb,   \
                                          float* c, int64_t ldc, int64_t mr, int64_t nr, bool add,               \
                                          int64_t ahead) {                                                       \
    const float* row[MR];                                                                                        \
    for (int r = 0; r < MR; ++r) row[r] = w + (r < mr ? r : 0) * ldw;                                            \
    /* a packed panel keeps the constant stride its loop was tuned with */                                      \
    if (ldb == KB)                                                                                               \
      rows_tile<gemm_lanes(GemmIsa::isa), MR, NR, KB>(kc, row, ahead, bp, std::integral_constant<int64_t, KB>{},  \
                                                      c, ldc, mr, nr, add);                                      \
    else                                                                                                         \
      rows_tile<gemm_lanes(GemmIsa::isa), MR, NR, KB>(kc, row, ahead, bp, ldb, c, ldc, mr, nr, add);             \
  }
#define GEMM_UKERNEL(name, isa, MR, NR, a, KA, KB) ZENITH_UK_DEFINE_##a(name, isa, MR, NR, KA, KB)
#include "zenith/kernels/gemm_ukernels.def"
#undef GEMM_UKERNEL

// The list as data, for choosing kernels at compile time (gemm_ukernel) and listing
// them at run time (gemm_ukernels(), gemm_ukernels.h).
struct GemmUkernelDef {
  const char* name;
  GemmIsa isa;
  int mr, nr;
  GemmA a;
  int ka, kb;
  MicroKernel packed;    // a == packed
  RowsMicroKernel rows;  // a == rows
};
#define ZENITH_UK_PACKED_packed(name) name
#define ZENITH_UK_PACKED_rows(name) nullptr
#define ZENITH_UK_ROWS_packed(name) nullptr
#define ZENITH_UK_ROWS_rows(name) name
inline constexpr GemmUkernelDef kGemmUkernels[] = {
#define GEMM_UKERNEL(name, isa, MR, NR, a, KA, KB) \
  {#name, GemmIsa::isa, MR, NR, GemmA::a, KA, KB, ZENITH_UK_PACKED_##a(name), ZENITH_UK_ROWS_##a(name)},
#include "zenith/kernels/gemm_ukernels.def"
#undef GEMM_UKERNEL
};

// The row of the list with this ISA, tile and layout of A (KA for packed A, KB B's
// panel width). Used in constant expressions: a kernel the list lacks is a compile error.
constexpr const GemmUkernelDef& gemm_ukernel(GemmIsa isa, int mr, int nr, GemmA a, int ka, int kb) {
  for (const GemmUkernelDef& u : kGemmUkernels)
    if (u.isa == isa && u.mr == mr && u.nr == nr && u.a == a && (a == GemmA::rows || u.ka == ka) && u.kb == kb)
      return u;
  throw "gemm_ukernels.def has no such micro-kernel";
}

// The tile sgemm runs on an ISA: its first row in the list.
constexpr const GemmUkernelDef& gemm_main_ukernel(GemmIsa isa) {
  for (const GemmUkernelDef& u : kGemmUkernels)
    if (u.isa == isa) return u;
  throw "gemm_ukernels.def has no micro-kernel for this ISA";
}

// How many rows of W the weight-rows GEMM (x @ W^T, W read in place) broadcasts per
// tile on an ISA. AVX-512 has 32 vector registers: 12 rows x 32 columns keep 24
// accumulators, and each panel of X^T (from L2) feeds 1.5x the FMAs of the 8-row tile;
// W's rows in transformers (768, 2304, 3072, ...) are multiples of 12. Measured on an
// Intel Xeon (family 6, model 167), 2 threads, against the 8-row tile in one process:
// BERT-base and MiniLM at 128 tokens 0.94x the time; 128 x 768 x 3072 1.09x the
// GFLOP/s. AVX2's 16 registers hold the main 6 x 16 tile at most. Weights whose rows
// crowd one L1 set run the main tile instead (rows_crowd_l1, gemm.cc).
constexpr int gemm_weight_rows_mr(GemmIsa isa) { return isa == GemmIsa::avx512 ? 12 : gemm_main_ukernel(isa).mr; }

}  // namespace zenith::gemm_detail
