// AVX2 dot kernels of the quantized formats: out[r] = w . a[r] for MR = 1..4 activation
// rows, each weight block decoded into registers once for all of them. The arithmetic
// (what is integer, where the floats come in) is ref_dot's, quant_formats.{h,cc}; only
// the order of float sums differs (none for the k-quants: their results are equal bit
// for bit). Chosen at run time where the CPU has AVX2, FMA and F16C (quant.cc).
//
// Integer dot products: _mm256_maddubs_epi16 multiplies unsigned bytes by signed bytes
// and adds pairs into int16 with saturation, then _mm256_madd_epi16 widens to int32.
// The pair sums never reach the int16 limit (32767), so nothing saturates; the
// activation codes are in [-127, 127] (quantize_act_row clamps) and:
//   signed codes c (q8_0 [-128, 127], q5_0 [-16, 15], int8): the sign trick,
//     maddubs(|c|, sign(q, c)): |c| <= 128 as unsigned, sign(q, c) in [-127, 127],
//     pairs <= 2 * 128 * 127 = 32512;
//   unsigned codes u (q4_1, uint4 [0, 15], q5_1 [0, 31], q4_k [0, 15], q5_k [0, 31],
//     q6_k [0, 63]): maddubs(u, q), pairs <= 2 * 63 * 127 = 16002;
//   nibbles less 8 (q4_0, int4_g64 / g128, value d x (u - 8)): maddubs(u, q) on the
//     nibbles as they are (pairs <= 2 * 15 * 127), plus the zero point's share
//     -8 x (the block's activation codes), from the quantizer's sums per 16 (QActRow::s16).
//     Two instructions per 32 values fewer than the sign trick: on Zen 5
//     with AVX2 (ZENITH_NO_AVX512=1, 2 threads, one row, cold weights) q4_0 GEMV 2048 x
//     5632 178-185 -> 156-159 us, int4_g128 182-184 -> 159-163 us; TinyLlama int4 decode
//     43.2 -> 45.2 tokens/s (the rest of a token's time is not this kernel's).
// test_quant.cc's worst-case test holds each format at its extreme codes and scales
// against +-127 activations and compares with the scalar reference exactly.
// int32 sums: a k-quant super-block's scaled sum stays below 2^29 (q6_k: 16 groups of
// 16 x 63 x 127 times |scale| <= 128, plus 32 x the sums of q x scale).
//
// nf4 multiplies floats (its levels are not integers; an int8 table would not be exact):
// the 16 levels are looked up as four byte planes by in-lane byte shuffles (dot_nf4),
// times absmax, FMAed with x. Measured (Zen 2, one thread, in cache): 7.0 ns per 32
// values with two _mm256_permutevar8x32_ps lookups and a blend per 8 values, ~2.5 with
// the byte planes.
//
// Why x is quantized rather than w decoded to floats, even for one row (decode):
// measured on Zen 2 (one thread, weights in cache, one row of x), q8_0 with K = 640 /
// 2048 took 1.60 / 1.42 ns per 32 values this way and 2.11 / 1.97 ns sign-extending the
// codes to floats and FMAing them with x (4 conversions and 4 FMAs per 32 values against
// 2 integer multiply-adds); each further row of x costs the integer path less still.
// Per format (ns per 32 values, one row / per row of a 4-row tile; Zen 2, q4_0 before
// rows8_nibbles, below): q8_0 1.4 / 1.2, q4_0 1.8 / 1.2, q5_0 2.2 / 1.3, q4_k 1.3 / 1.1, q6_k 1.5 / 1.0, int8 1.2 / 1.0, nf4 3.5 / 1.5.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "zenith/kernels/quant_formats.h"

#ifndef ZENITH_QUANT_AVXVNNI
#define ZENITH_QUANT_AVXVNNI 0
#endif

#pragma GCC push_options
#if ZENITH_QUANT_AVXVNNI
#pragma GCC target("avxvnni,avx2,fma,f16c")
#else
#pragma GCC target("avx2,fma,f16c")
#endif

namespace zenith::quant {
namespace {

// Compiled twice: as AVX2, and with ZENITH_QUANT_AVXVNNI as AVX-VNNI (quant_avxvnni.cc),
// where the integer dot products below are one vpdpbusd each.
constexpr bool kVnni = ZENITH_QUANT_AVXVNNI;

inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The sums of each 4 products u x s (u unsigned bytes, s signed bytes) as 8 int32, plus
// acc. AVX-VNNI: one vpdpbusd, exact for any bytes. AVX2: maddubs adds pairs into int16
// with saturation (callers keep every pair within 32767, as the header says), madd widens.
inline __m256i dot_acc(__m256i acc, __m256i u, __m256i s) {
#if ZENITH_QUANT_AVXVNNI
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
inline __m256i dot4(__m256i u, __m256i s) {
#if ZENITH_QUANT_AVXVNNI
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// An empty asm that makes GCC hold the int8 GEMM tiles' int32 sums in registers at
// this point. The tiles call it once a quad, so the sums are updated in quad order: left
// alone, GCC computed many quads' products first and spilled them, or kept an array of
// sums partly on the stack.
inline void keep_in_registers(__m256i& a, __m256i& b, __m256i& c, __m256i& d) {
  __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d));
}
inline void keep_in_registers(__m256i& a, __m256i& b, __m256i& c, __m256i& d, __m256i& e, __m256i& f, __m256i& g,
                              __m256i& h) {
  __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d), "+x"(e), "+x"(f), "+x"(g), "+x"(h));
}

inline float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The 32 codes of a 16-byte chunk of nibbles in value order: low nibbles are values
// 0..15, high nibbles 16..31.
// The 16 bytes in both 128-bit lanes (a broadcast load, no shuffle), the high lane
// shifted right by 4 (a per-lane variable shift).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(t, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(15));
}

// Bit j of the u32 at p as byte j: 0xFF where set, 0 where not (the 5th bits of q5_0 /
// q5_1 codes). Byte j gets qh's byte j / 8, ORed with every bit but bit j % 8.
inline __m256i bit_mask32(const uint8_t* p) {
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i others = _mm256_set1_epi64x(int64_t(0x7fbfdfeff7fbfdfeull));
  const __m256i v = _mm256_or_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(qh)), spread), others);
  return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
}

// ---- Formats of 32-value chunks (small_block_layout) and int8 ----
// Chunk b (global 32-value index) of every row into acc (one of two sets, so two
// chunks' FMAs are in flight), and the min term into accm.
template <QFormat F, int MR>
inline void small_chunk(const uint8_t* w, int64_t b, const QActRow* a, __m256 (&acc)[MR], float (&accm)[MR]) {
  constexpr SmallBlock s = small_block_layout(F);
  const uint8_t* p = w + (b / s.chunks) * s.bytes;
  const int c = int(b % s.chunks);
  __m256i codes;
  if constexpr (s.int8) {
    codes = loadu(p + s.qs + 32 * c);
  } else {
    codes = nibbles32(p + s.qs + 16 * c);
    if constexpr (s.qh >= 0 && s.has_m) {  // q5_1: nibble + 16 x bit
      codes = _mm256_or_si256(codes, _mm256_and_si256(bit_mask32(p + s.qh), _mm256_set1_epi8(0x10)));
    } else if constexpr (s.qh >= 0) {  // q5_0: nibble + 16 x bit - 16 = nibble, or nibble | 0xF0 (negative)
      static_assert(s.offset == 16);
      codes = _mm256_or_si256(codes, _mm256_andnot_si256(bit_mask32(p + s.qh), _mm256_set1_epi8(char(0xF0))));
    }
  }
  // Nibbles less 8 (q4_0, int4_g64/g128): the unsigned nibbles as they are, and the zero
  // point's share -8 x (the block's activation codes), from the quantizer's sums per 16.
  constexpr bool nibble_zero = !s.int8 && !s.has_m && s.qh < 0;
  static_assert(!nibble_zero || s.offset == 8);
  const __m256i ux = s.has_m || nibble_zero ? codes : _mm256_sign_epi8(codes, codes);  // |codes| (-128: 128)
  const float d = f16(p);
  for (int r = 0; r < MR; ++r) {
    __m256i qx = loadu(a[r].q + 32 * b);
    if constexpr (!s.has_m && !nibble_zero) qx = _mm256_sign_epi8(qx, codes);
    __m256i dot;
    if constexpr (nibble_zero)  // into lane 0: the lanes are summed
      dot = dot_acc(_mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * (a[r].s16[2 * b] + a[r].s16[2 * b + 1]))), ux, qx);
    else
      dot = dot4(ux, qx);
    const float da = a[r].d[b];
    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(dot), acc[r]);
    if constexpr (s.has_m) accm[r] += (f16(p + 2) * da) * float(a[r].s16[2 * b] + a[r].s16[2 * b + 1]);
  }
}

#define ZENITH_QDOT_INLINE __attribute__((always_inline)) inline

template <QFormat F, int MR>
ZENITH_QDOT_INLINE void dot_small(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  __m256 acc0[MR], acc1[MR];
  float accm[MR];
  for (int r = 0; r < MR; ++r) {
    acc0[r] = acc1[r] = _mm256_setzero_ps();
    accm[r] = 0.0f;
  }
  const int64_t nb = K / 32;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    small_chunk<F, MR>(w, b, a, acc0, accm);
    small_chunk<F, MR>(w, b + 1, a, acc1, accm);
  }
  if (b < nb) small_chunk<F, MR>(w, b, a, acc0, accm);
  for (int r = 0; r < MR; ++r) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r])) + accm[r];
}

// int8: an f32 row scale, then K int8 codes; K need not be a multiple of 32 (the short
// last chunk is scalar). One chunk's term, codes c (ux = |c|) against a row's codes xq on
// its scale d, and a row's result from its two accumulators: shared by dot_int8 and the
// decode kernel below, which must sum bit for bit alike.
ZENITH_QDOT_INLINE __m256 int8_term(__m256i c, __m256i ux, __m256i xq, float d, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(dot4(ux, _mm256_sign_epi8(xq, c))), acc);
}
ZENITH_QDOT_INLINE float int8_result(const uint8_t* w, int64_t K, const QActRow& a, __m256 acc0, __m256 acc1) {
  const int64_t nb = K / 32;
  float y = hsum(_mm256_add_ps(acc0, acc1));
  if (nb * 32 < K) {
    int32_t dot = 0;
    const int8_t* c = reinterpret_cast<const int8_t*>(w + 4);  // as ref_dot reads them
    for (int64_t k = nb * 32; k < K; ++k) dot += c[k] * a.q[k];
    y += a.d[nb] * float(dot);
  }
  float scale;
  std::memcpy(&scale, w, 4);
  return scale * y;
}

template <int MR>
inline void int8_chunk(const uint8_t* codes_at, int64_t b, const QActRow* a, __m256 (&acc)[MR]) {
  const __m256i codes = loadu(codes_at + 32 * b);
  const __m256i ux = _mm256_sign_epi8(codes, codes);
  for (int r = 0; r < MR; ++r) acc[r] = int8_term(codes, ux, loadu(a[r].q + 32 * b), a[r].d[b], acc[r]);
}

template <int MR>
ZENITH_QDOT_INLINE void dot_int8(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  const uint8_t* codes = w + 4;
  __m256 acc0[MR], acc1[MR];
  for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  const int64_t nb = K / 32;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    int8_chunk<MR>(codes, b, a, acc0);
    int8_chunk<MR>(codes, b + 1, a, acc1);
  }
  if (b < nb) int8_chunk<MR>(codes, b, a, acc0);
  for (int r = 0; r < MR; ++r) out[r] = int8_result(w, K, a[r], acc0[r], acc1[r]);
}

// int8 with one row of x (decode): 4 weight rows at a time, each summed as dot_int8<1>
// sums it (the same chunks into the same two accumulators: bit-identical), and in calls
// over kRowPrefetchMinBytes the 4 rows after the next 4 prefetched, a line per two
// chunks. Four streams where over_rows reads one row and prefetches 1 KiB past it:
// TinyLlama-1.1B int8 decode (32 tokens, 2 threads, AMD Zen 3, AVX2) took 0.945-0.968x
// the time; prefetching 4 rows ahead instead 0.963x, 12 rows ahead 0.977x, none 1.070x
// (docs/benchmarks/2026-12-02c-zen3-avx2).
ZENITH_QDOT_INLINE void int8_rows4_chunk(const uint8_t* w, int64_t rb, int64_t b, const QActRow& a, __m256 (&acc)[4]) {
  const __m256i xq = loadu(a.q + 32 * b);
  for (int i = 0; i < 4; ++i) {
    const __m256i c = loadu(w + i * rb + 4 + 32 * b);
    acc[i] = int8_term(c, _mm256_sign_epi8(c, c), xq, a.d[b], acc[i]);
  }
}
template <bool kPrefetch>
void dot_int8_rows4(const uint8_t* w, int64_t rb, int64_t K, const QActRow& a, float* out) {
  __m256 acc0[4], acc1[4];
  for (int i = 0; i < 4; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  const int64_t nb = K / 32;
  // an integer: it may lie past the weights, which a prefetch may touch (never faults)
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(w) + uintptr_t(8 * rb + 4);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if constexpr (kPrefetch)
      for (int i = 0; i < 4; ++i)
        __builtin_prefetch(reinterpret_cast<const void*>(ahead + uintptr_t(i * rb + 32 * b)), 0, 3);
    int8_rows4_chunk(w, rb, b, a, acc0);
    int8_rows4_chunk(w, rb, b + 1, a, acc1);
  }
  if (b < nb) int8_rows4_chunk(w, rb, b, a, acc0);
  for (int i = 0; i < 4; ++i) out[i] = int8_result(w + i * rb, K, a, acc0[i], acc1[i]);
}

// ---- k-quants: one integer per super-block and row, then ref_dot's float formula ----
// kPickWord[k]: the shuffle that broadcasts int16 lane k of a 128-bit lane to all of it.
alignas(32) constexpr uint8_t kPickWord[8][32] = {
#define ZENITH_PICK(k) {2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, \
                        2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k,      \
                        2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1}
    ZENITH_PICK(0), ZENITH_PICK(1), ZENITH_PICK(2), ZENITH_PICK(3),
    ZENITH_PICK(4), ZENITH_PICK(5), ZENITH_PICK(6), ZENITH_PICK(7),
#undef ZENITH_PICK
};

// q4_k / q5_k: sub-blocks (2i, 2i + 1) are the low and high nibbles of 32 bytes; the
// scaled sums go through madd by the sub-block's scale, the mins through the 16-sums.
template <bool FIVE, int MR>
ZENITH_QDOT_INLINE void dot_q45k(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  constexpr int64_t kBytes = FIVE ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
  constexpr size_t kQs = FIVE ? offsetof(BlockQ5K, qs) : offsetof(BlockQ4K, qs);
  const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  const __m128i pairs = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  float y[MR] = {};
  for (int64_t sb = 0; sb < K / 256; ++sb) {
    const uint8_t* p = w + sb * kBytes;
    // unpack_q4k_scales four bytes at a time: the 8 scales and the 8 mins as bytes
    uint32_t s[3];
    std::memcpy(s, p + 4, 12);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, top2 = 0x30303030u;
    const __m128i sc8 = _mm_setr_epi32(int(s[0] & low6), int((s[2] & low4) | ((s[0] >> 2) & top2)), 0, 0);
    const __m128i mn8 = _mm_setr_epi32(int(s[1] & low6), int(((s[2] >> 4) & low4) | ((s[1] >> 2) & top2)), 0, 0);
    // scales as int16 in both 128-bit lanes (picked per sub-block below); mins as 16
    // int16 lanes, min j twice: madd with the 16-sums gives min_j x sum_j.
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(mn8, pairs));
    const __m256i qh = FIVE ? loadu(p + offsetof(BlockQ5K, qh)) : _mm256_setzero_si256();
    __m256i isum[MR];
    for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      const __m256i qb = loadu(p + kQs + 32 * i);
      __m256i lo = _mm256_and_si256(qb, m4), hi = _mm256_and_si256(_mm256_srli_epi16(qb, 4), m4);
      if constexpr (FIVE) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i + 1), one), 4));
      }
      const __m256i s_lo = _mm256_shuffle_epi8(scales, loadu(kPickWord[2 * i]));
      const __m256i s_hi = _mm256_shuffle_epi8(scales, loadu(kPickWord[2 * i + 1]));
      for (int r = 0; r < MR; ++r) {
        const int8_t* qx = a[r].q + 256 * sb + 64 * i;
        const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, loadu(qx)), s_lo);
        const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, loadu(qx + 32)), s_hi);
        isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(plo, phi));
      }
    }
    const float d = f16(p), dmin = f16(p + 2);
    for (int r = 0; r < MR; ++r) {
      const int32_t is = hsum_i32(isum[r]);
      const int32_t ms = hsum_i32(_mm256_madd_epi16(loadu(a[r].s16 + 16 * sb), mins));
      const float da = a[r].d[sb];
      y[r] += (d * da) * float(is) - (dmin * da) * float(ms);
    }
  }
  for (int r = 0; r < MR; ++r) out[r] = y[r];
}

// q6_k: each half of 128 values is four 32-value quarters built from ql's nibbles and
// qh's bit pairs; a quarter spans two 16-value groups, so its scale vector holds group
// g's scale in the low 8 int16 lanes and g + 1's in the high 8. The -32 offset comes off
// as 32 x sum_g scale_g x sum16_g.
template <int MR>
ZENITH_QDOT_INLINE void dot_q6k(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
  float y[MR] = {};
  for (int64_t sb = 0; sb < K / 256; ++sb) {
    const uint8_t* p = w + sb * int64_t(sizeof(BlockQ6K));
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(BlockQ6K, scales)));
    __m256i isum[MR];
    for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = loadu(p + 64 * h), l1 = loadu(p + 64 * h + 32);
      const __m256i hb = loadu(p + offsetof(BlockQ6K, qh) + 32 * h);
      const __m256i u[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4)),
          _mm256_or_si256(_mm256_and_si256(l1, m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4)),
      };
      for (int t = 0; t < 4; ++t) {
        const int64_t g = 8 * h + 2 * t;  // the quarter's first 16-value group
        const __m128i pick = _mm_set_epi64x(int64_t(0x0101010101010101ull * uint64_t(g + 1)),
                                            int64_t(0x0101010101010101ull * uint64_t(g)));
        const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
        for (int r = 0; r < MR; ++r) {
          const __m256i qx = loadu(a[r].q + 256 * sb + 128 * h + 32 * t);
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u[t], qx), scale));
        }
      }
    }
    const __m256i scales = _mm256_cvtepi8_epi16(sc8);
    const float d = f16(p + offsetof(BlockQ6K, d));
    for (int r = 0; r < MR; ++r) {
      const __m256i offs = _mm256_madd_epi16(loadu(a[r].s16 + 16 * sb), scales);
      const int32_t is = hsum_i32(_mm256_sub_epi32(isum[r], _mm256_slli_epi32(offs, 5)));
      y[r] += (d * a[r].d[sb]) * float(is);
    }
  }
  for (int r = 0; r < MR; ++r) out[r] = y[r];
}

// ---- nf4: floats ----
// The levels as four byte planes (byte k of each level's float bits, in both 128-bit
// lanes): one in-lane byte shuffle per plane looks up 32 codes at once, and unpacking
// the planes bytewise, then wordwise, assembles the floats. The unpacks interleave
// within lanes, so the codes go in as lane 0 = values 0-3, 8-11, 16-19, 24-27 and lane 1
// = 4-7, 12-15, 20-23, 28-31; the floats then come out in value order, 8 at a time.
struct NF4Planes {
  __m256i plane[4];
  NF4Planes() {
    alignas(16) uint8_t bytes[4][16];
    for (int i = 0; i < 16; ++i) {
      uint32_t u;
      std::memcpy(&u, &kNF4[i], 4);
      for (int k = 0; k < 4; ++k) bytes[k][i] = uint8_t(u >> (8 * k));
    }
    for (int k = 0; k < 4; ++k)
      plane[k] = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(bytes[k])));
  }
};

// The 32 codes of a 16-byte chunk in the order above: bytes 0-3, 8-11 of the chunk in
// lane 0 (low nibbles, then high), bytes 4-7, 12-15 in lane 1.
inline __m256i nf4_codes(const uint8_t* qs) {
  const __m256i order = _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11,  //
                                         4, 5, 6, 7, 12, 13, 14, 15, 4, 5, 6, 7, 12, 13, 14, 15);
  const __m256i t = _mm256_shuffle_epi8(
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))), order);
  return _mm256_and_si256(_mm256_srlv_epi64(t, _mm256_setr_epi64x(0, 4, 0, 4)), _mm256_set1_epi8(15));
}

template <int MR>
ZENITH_QDOT_INLINE void dot_nf4(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  static const NF4Planes levels;
  // FMA chains in flight: four sets of accumulators for one or two rows (one row with two
  // was bound by FMA latency), two for more (registers)
  constexpr int S = MR <= 2 ? 4 : 2;
  __m256 acc[S][MR];
  for (int i = 0; i < S; ++i)
    for (int r = 0; r < MR; ++r) acc[i][r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < K / 64; ++g) {
    const uint8_t* p = w + g * int64_t(sizeof(BlockNF4));
    const __m256 absmax = _mm256_set1_ps(f16(p));
    for (int c = 0; c < 2; ++c) {
      const __m256i codes = nf4_codes(p + 2 + 16 * c);
      __m256i b[4];
      for (int k = 0; k < 4; ++k) b[k] = _mm256_shuffle_epi8(levels.plane[k], codes);
      const __m256i lo01 = _mm256_unpacklo_epi8(b[0], b[1]), hi01 = _mm256_unpackhi_epi8(b[0], b[1]);
      const __m256i lo23 = _mm256_unpacklo_epi8(b[2], b[3]), hi23 = _mm256_unpackhi_epi8(b[2], b[3]);
      const __m256i f[4] = {_mm256_unpacklo_epi16(lo01, lo23), _mm256_unpackhi_epi16(lo01, lo23),
                            _mm256_unpacklo_epi16(hi01, hi23), _mm256_unpackhi_epi16(hi01, hi23)};
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        // NF4[q] * absmax, the reference's product, then times x
        const __m256 wv = _mm256_mul_ps(_mm256_castsi256_ps(f[v]), absmax);
        const int64_t k = 64 * g + 32 * c + 8 * v;
        for (int r = 0; r < MR; ++r) acc[v % S][r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[r].x + k), acc[v % S][r]);
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    __m256 t = acc[0][r];
    for (int i = 1; i < S; ++i) t = _mm256_add_ps(t, acc[i][r]);
    out[r] = hsum(t);
  }
}

// The exported kernels: a row function run over a block of weight rows.
using RowDot = void (*)(const uint8_t*, int64_t, const QActRow*, float*);
template <int MR, RowDot kDot>
void over_rows(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t K, const QActRow* a, float* out,
               int64_t ldo) {
  const bool prefetch = rows * row_bytes > kRowPrefetchMinBytes;
  for (int64_t n = 0; n < rows; ++n) {
    float o[MR];
    if (prefetch) prefetch_row_ahead(w + n * row_bytes, row_bytes);
    kDot(w + n * row_bytes, K, a, o);
    for (int r = 0; r < MR; ++r) out[r * ldo + n] = o[r];
  }
}

// ---- 4-bit nibble formats: 8 weight rows at a time (rows8_nibbles) ----
// (q4_0, int4_g64 / g128: d x (u - 8); q4_1, uint4_g64 / g128: d x u + m.) One weight
// row at a time (dot_small) pays, per 32 values and row of x, for an f16 scale
// conversion, a scalar multiply, a broadcast, an int-to-float conversion and an FMA
// beside its five integer instructions. Eight weight rows at once share all of that: per
// 32 values, rows 2i and 2i + 1 share one register (their 16 bytes of nibbles in the two
// lanes); the low and the high nibbles meet x's values 0-15 and 16-31 (each broadcast to
// both lanes) in two maddubs whose int16 sums add; two rounds of hadd_epi16 reduce the 8
// rows' lanes (|sum| <= 30480: no wrap; test_quant's worst case reaches it) and one madd
// widens them to a vector of 8 int32 sums (rows 0 2 4 6 1 3 5 7); the zero point (-8 x
// the block's sum of x codes) or the min (m x the sum) is one broadcast per block, the
// scales one f16 vector per block. The next 8 rows are prefetched while these are summed.
// Measured (Zen 4, ZENITH_NO_AVX512=1, 2 threads, q4_0, N 5632 x K 2048, ns per 32 values
// per thread, hot / cold weights): one row of x 1.00 / 1.25 -> 0.72 / 0.94 (cold ~38 GB/s,
// near the machine's streaming rate); 16 rows of x (prefill) 0.74 -> 0.47. TinyLlama int4
// decode (tinyllama-decode, 32 tokens after a 16-token prompt): 3.2x -> 4.4x fp32.
template <QFormat F>
constexpr bool kNibbles = small_block_layout(F).valid && !small_block_layout(F).int8 && small_block_layout(F).qh < 0;

// The f16 at p of rows 0 2 4 6 1 3 5 7 (row_bytes apart) as floats.
inline __m256 f16_rows8(const uint8_t* p, int64_t rb) {
  const auto h = [&](int r) {
    int16_t v;
    std::memcpy(&v, p + r * rb, 2);
    return v;
  };
  return _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(2), h(4), h(6), h(1), h(3), h(5), h(7)));
}

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

template <QFormat F, int MR>
ZENITH_QDOT_INLINE void dot_rows8_nibbles(const uint8_t* w, int64_t rb, int64_t K, const QActRow* a, float* out,
                                          int64_t ldo) {
  constexpr SmallBlock s = small_block_layout(F);
  static_assert(kNibbles<F> && (s.has_m || s.offset == 8));
  const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  __m256 acc[MR], dw = _mm256_setzero_ps(), mw = _mm256_setzero_ps();
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t nc = K / 32;
  // The next 8 rows (contiguous: 8 x rb bytes) into cache while these are summed, the
  // same share of them per step: the hardware prefetchers lose 8 interleaved streams.
  // Into L1 when the next rows fit there beside these, else into L2.
  // (Addresses as integers: past the last rows they point beyond the weights, which a
  // prefetch may do but pointer arithmetic may not.)
  const uintptr_t next = reinterpret_cast<uintptr_t>(w) + uintptr_t(8 * rb);
  const bool l1 = 16 * rb <= (24 << 10);
  for (int64_t b = 0; b < nc; ++b) {
    const uintptr_t pf = next + uintptr_t(b * 8 * s.bytes / s.chunks);
    l1 ? prefetch_lines<3>(pf, 3) : prefetch_lines<2>(pf, 3);
    const uint8_t* blk = w + (b / s.chunks) * s.bytes;
    const int c = int(b % s.chunks);
    if (c == 0) {
      dw = f16_rows8(blk, rb);
      if constexpr (s.has_m) mw = f16_rows8(blk + 2, rb);
    }
    const uint8_t* qs = blk + s.qs + 16 * c;
    __m256i lo[4], hi[4];  // weight rows 2i (low lane) and 2i + 1 (high lane): low and high nibbles
    for (int i = 0; i < 4; ++i) {
      const uint8_t* p = qs + 2 * i * rb;
      const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(p)), load128(p + rb), 1);
      lo[i] = _mm256_and_si256(t, m4);
      hi[i] = _mm256_and_si256(_mm256_srli_epi16(t, 4), m4);
    }
    for (int r = 0; r < MR; ++r) {
      const __m256i xlo = _mm256_broadcastsi128_si256(load128(a[r].q + 32 * b));
      const __m256i xhi = _mm256_broadcastsi128_si256(load128(a[r].q + 32 * b + 16));
      __m256i v[4];  // int16: each the sum of 4 products, |v| <= 4 x 15 x 127 = 7620
      for (int i = 0; i < 4; ++i) v[i] = _mm256_add_epi16(_mm256_maddubs_epi16(lo[i], xlo), _mm256_maddubs_epi16(hi[i], xhi));
      // Pairs summed across the 8 rows in int16 twice (|sum| <= 4 x 7620 = 30480, no wrap),
      // then widened: hadd(v0, v1) is rows 0 2 | 1 3 (4 sums each), hadd(v2, v3) rows
      // 4 6 | 5 7; their hadd 0 2 4 6 | 1 3 5 7 (2 sums each), madd with ones one int32 each.
      __m256i sum = _mm256_madd_epi16(
          _mm256_hadd_epi16(_mm256_hadd_epi16(v[0], v[1]), _mm256_hadd_epi16(v[2], v[3])), ones);
      const int32_t xsum = int32_t(a[r].s16[2 * b]) + a[r].s16[2 * b + 1];
      const __m256 da = _mm256_set1_ps(a[r].d[b]);
      if constexpr (s.has_m) {
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(mw, da), _mm256_set1_ps(float(xsum)), acc[r]);
      } else {
        sum = _mm256_add_epi32(sum, _mm256_set1_epi32(-8 * xsum));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sum), acc[r]);
    }
  }
  for (int r = 0; r < MR; ++r)
    _mm256_storeu_ps(out + r * ldo, _mm256_permutevar8x32_ps(acc[r], _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

template <QFormat F, int MR>
void rows8_nibbles(const uint8_t* w, int64_t rb, int64_t rows, int64_t K, const QActRow* a, float* out, int64_t ldo) {
  int64_t n = 0;
  for (; n + 8 <= rows; n += 8) dot_rows8_nibbles<F, MR>(w + n * rb, rb, K, a, out + n, ldo);
  over_rows<MR, dot_small<F, MR>>(w + n * rb, rb, rows - n, K, a, out + n, ldo);
}
// The kernels of a 32-value-chunk format: 8 weight rows at a time for nibbles.
template <QFormat F, int MR>
constexpr QDotFn small_kernel() {
  if constexpr (kNibbles<F>) return rows8_nibbles<F, MR>;
  else return over_rows<MR, dot_small<F, MR>>;
}

#define ZENITH_QDOT_ROWS(...) \
  {over_rows<1, __VA_ARGS__<1>>, over_rows<2, __VA_ARGS__<2>>, over_rows<3, __VA_ARGS__<3>>, over_rows<4, __VA_ARGS__<4>>}
template <QFormat F>
constexpr QDotFn kSmall[kMaxDotRows] = {small_kernel<F, 1>(), small_kernel<F, 2>(), small_kernel<F, 3>(),
                                        small_kernel<F, 4>()};
void int8_rows_1(const uint8_t* w, int64_t rb, int64_t rows, int64_t K, const QActRow* a, float* out, int64_t ldo) {
  // as over_rows: only calls streaming many weight bytes prefetch
  const auto rows4 = rows * rb > kRowPrefetchMinBytes ? dot_int8_rows4<true> : dot_int8_rows4<false>;
  int64_t n = 0;
  for (; n + 4 <= rows; n += 4) rows4(w + n * rb, rb, K, a[0], out + n);
  over_rows<1, dot_int8<1>>(w + n * rb, rb, rows - n, K, a, out + n, ldo);
}
constexpr QDotFn kInt8[kMaxDotRows] = {int8_rows_1, over_rows<2, dot_int8<2>>, over_rows<3, dot_int8<3>>,
                                       over_rows<4, dot_int8<4>>};
constexpr QDotFn kQ4K[kMaxDotRows] = {over_rows<1, dot_q45k<false, 1>>, over_rows<2, dot_q45k<false, 2>>,
                                      over_rows<3, dot_q45k<false, 3>>, over_rows<4, dot_q45k<false, 4>>};
constexpr QDotFn kQ5K[kMaxDotRows] = {over_rows<1, dot_q45k<true, 1>>, over_rows<2, dot_q45k<true, 2>>,
                                      over_rows<3, dot_q45k<true, 3>>, over_rows<4, dot_q45k<true, 4>>};
constexpr QDotFn kQ6K[kMaxDotRows] = ZENITH_QDOT_ROWS(dot_q6k);
constexpr QDotFn kNF4Rows[kMaxDotRows] = ZENITH_QDOT_ROWS(dot_nf4);
#undef ZENITH_QDOT_ROWS

}  // namespace

// ---- The activation quantizer (AVX2's only: AVX-VNNI plans use it too) ----
#if !ZENITH_QUANT_AVXVNNI
namespace {

// 32 values times id, rounded half to even (cvtps2dq in the default rounding mode, as
// nearbyint), clamped to [-hi, hi] (hi 127, or 63), packed to int8 in value order; their sums per 16
// into s16[0..1].
inline void quantize32(const float* x, __m256 id, __m256 hi, int8_t* q, int16_t* s16) {
  const __m256 lo = _mm256_sub_ps(_mm256_setzero_ps(), hi);
  __m256i v[4];
  for (int i = 0; i < 4; ++i)
    v[i] = _mm256_cvtps_epi32(_mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), id))));
  // packs interleave the 128-bit lanes: values land as dwords 0 2 4 6 1 3 5 7
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  const __m256i codes = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), codes);
  __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), codes), _mm256_set1_epi16(1));
  quads = _mm256_hadd_epi32(quads, quads);
  quads = _mm256_hadd_epi32(quads, quads);  // dword 0: values 0-15, dword 4: values 16-31
  s16[0] = int16_t(_mm256_extract_epi32(quads, 0));
  s16[1] = int16_t(_mm256_extract_epi32(quads, 4));
}

}  // namespace

void quantize_act_row_avx2(const float* x, int64_t K, int64_t block, int8_t* q, float* d, int16_t* s16,
                           float scale, int qmax) {
  const float top = float(qmax);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), big = _mm256_set1_ps(FLT_MAX);
  const int64_t full = K / block * block;
  for (int64_t b0 = 0; b0 < full; b0 += block) {
    __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int64_t k = b0; k < b0 + block; k += 8) {
      const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask);
      amax = _mm256_max_ps(amax, a);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ));  // inf or NaN
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float m = scale > 0.0f ? top * scale : _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const bool finite = _mm256_movemask_ps(bad) == 0;
    const float id = act_block_multiplier(m, finite, scale, top, d + b0 / block);
    if (id == 0.0f) {
      std::memset(q + b0, 0, size_t(block));
      std::memset(s16 + b0 / 16, 0, size_t(block / 16) * sizeof(int16_t));
      continue;
    }
    for (int64_t k = b0; k < b0 + block; k += 32)
      quantize32(x + k, _mm256_set1_ps(id), _mm256_set1_ps(top), q + k, s16 + k / 16);
  }
  if (full < K)  // a short last block (int8 rows of any K): the reference
    quantize_act_row(x + full, K - full, block, q + full, d + full / block, s16 + full / 16, scale, qmax);
}

bool quantize_uniform_row_avx2(const float* x, const float* mul, int64_t K, float id, int qmax, int8_t* q,
                               int32_t* total) {
  const __m256 vid = _mm256_set1_ps(id), hi = _mm256_set1_ps(float(qmax)), lo = _mm256_sub_ps(_mm256_setzero_ps(), hi);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), big = _mm256_set1_ps(FLT_MAX);
  __m256 bad = _mm256_setzero_ps();
  __m256i sum = _mm256_setzero_si256();
  const auto run = [&](auto with_mul) {
    for (int64_t k = 0; k < K; k += 32) {
      __m256i v[4];
      for (int i = 0; i < 4; ++i) {
        __m256 a = _mm256_loadu_ps(x + k + 8 * i);
        if constexpr (decltype(with_mul)::value) a = _mm256_mul_ps(a, _mm256_loadu_ps(mul + k + 8 * i));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(a, abs_mask), big, _CMP_NLE_UQ));  // inf or NaN
        v[i] = _mm256_cvtps_epi32(_mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_mul_ps(a, vid))));
        sum = _mm256_add_epi32(sum, v[i]);
      }
      // packs interleave the 128-bit lanes, as in quantize32
      const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k),
                          _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
  };
  if (mul) run(std::true_type{});
  else run(std::false_type{});
  if (_mm256_movemask_ps(bad)) return false;  // (a NaN's lanes hold INT_MIN: not the row's sum)
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  *total = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1)));
  return true;
}

#endif

namespace {

// The first n (1..8) floats of v to p: the GEMM tiles' stores, whole or at the columns' end.
inline void store_first(float* p, __m256 v, int n) {
  if (n == 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  std::memcpy(p, t, size_t(n) * sizeof(float));
}

// The packed weight's codes are + 128 (unsigned), as for VNNI; the sign-trick tiles
// below read them back signed.
inline __m256i signed_codes(const uint8_t* p) { return _mm256_xor_si256(loadu(p), _mm256_set1_epi8(char(0x80))); }

// The int8 GEMM tile on AVX2 (quant_formats.h): MR rows by 8 columns at a time, the
// block's four groups of 8 columns in turn while its codes stay in L1. Per 32-value
// block of K, 8 quads of 4 codes per column: each a broadcast of 4 activation codes per
// row and the sign trick of the dot kernels (maddubs(|c|, sign(q, c)), pairs <= 32512,
// no saturation) into int32 sums; then each block's sums are scaled by the row's
// activation scale into float accumulators. 4 instructions per row and 32 multiply-adds,
// where the dot kernels spend 5 and reduce each output's 8 lanes at the end. For rows of
// 8-bit codes that are not uniform: fewer than 8 rows (kQ8GemmRows) handed a packed
// weight, and static or conv rows past the uniform tiles' K; 7-bit activation codes go to
// q8_gemm_tile_u8.
template <int MR>
void q8_gemm_tile(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy,
                  int nvalid) {
  for (int g = 0; 8 * g < nvalid; ++g) {  // groups of 8 columns: bytes [32g, 32g + 32) of each quad
    __m256 f[MR];
    for (int r = 0; r < MR; ++r) f[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < kpad / 32; ++b) {
      __m256i s[MR];
      for (int r = 0; r < MR; ++r) s[r] = _mm256_setzero_si256();
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
      for (int q = 0; q < 8; ++q) {
        const __m256i c = signed_codes(wq + 128 * q), uc = _mm256_sign_epi8(c, c);  // |c|: -128 reads as 128
        for (int r = 0; r < MR; ++r) {
          int32_t v;
          std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
          s[r] = dot_acc(s[r], uc, _mm256_sign_epi8(_mm256_set1_epi32(v), c));
        }
      }
      for (int r = 0; r < MR; ++r) f[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(a[r].d[b]), f[r]);
    }
    const int n = std::min(8, nvalid - 8 * g);
    const __m256 sc = _mm256_loadu_ps(ws + 8 * g);
    for (int r = 0; r < MR; ++r) {
      store_first(y + r * ldy + 8 * g, _mm256_mul_ps(f[r], sc), n);
    }
  }
}

// The same for rows whose blocks share one scale (a[r].d[0]), up to 8 rows: int32 sums
// over the whole K (at most 127 x 127 x K), scaled once at the store. NONNEG: every
// activation code is in [0, 127] (a conv's input after ReLU), so the codes are maddubs'
// unsigned operand as they are and the weight codes its signed one, pairs at most 2 x
// 127 x 128 = 32512: no sign trick, 0.69-0.75x the time in a tile A/B on Zen 4 (8 rows,
// ResNet-50's K of 576 to 2304).
// AVX-VNNI (kVnni): the weight codes go in as packed, c + 128, against the activation
// codes (vpdpbusd has no pair sums to saturate), and -128 x the row's codes, the zero
// point's share, starts each sum, as in the AVX-512 tile; NONNEG changes nothing there.
// W7 (AVX2 only, with NONNEG): every weight code within +-63 (PackedOperand::q8_max;
// zenith.quantize makes conv filters so on AVX2, as ONNX Runtime's opt-in reduce_range
// does). A maddubs pair is then at most 2 x 127 x 63 = 16002, so two quads' pairs add in
// int16 (at most 32004) before one madd widens them: 3 instructions of the two multiply
// pipes per row and 64 multiply-adds where NONNEG alone spends 4. One thread in L1, 8
// rows, K 576, 1152 and 2304 (Zen 3): 0.84-0.86x the NONNEG tile's time, bit-identical
// on the same codes.
template <int MR, bool NONNEG, bool W7 = false>
void q8_gemm_tile_uniform(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy,
                          int nvalid) {
  static_assert(MR >= 1 && MR <= 8);
  static_assert(!W7 || (NONNEG && !kVnni));
  [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
  const auto start = [&](int r) { return _mm256_set1_epi32(r < MR && kVnni ? -128 * a[r].total : 0); };
  for (int g = 0; 8 * g < nvalid; ++g) {
    // The sums named, not an array, and pinned in registers once a quad
    // (keep_in_registers): GCC kept an array of 8 partly on the stack (two stores and
    // several moves a quad).
    // Bit-identical; ResNet-50 int8-static (Zen 3, paired rounds) b1 0.980x and 0.986x
    // the time, b8 0.987x and 0.939x. Sums past MR stay at their start (registers held
    // for nothing at small MR). The AVX-VNNI build (sums start at -128 x the row's
    // codes) shares this code: compiled and read, not run (no AVX-VNNI here).
    __m256i s0 = start(0), s1 = start(1), s2 = start(2), s3 = start(3), s4 = start(4), s5 = start(5),
            s6 = start(6), s7 = start(7);
    const uint8_t* wq = wb + 32 * g;
    for (int64_t q = 0; q < kpad / 4; q += W7 ? 2 : 1) {  // W7: quads q, q + 1 (kpad / 4: 8s)
      const __m256i c = kVnni ? loadu(wq + 128 * q) : signed_codes(wq + 128 * q);
      const __m256i uc = kVnni || NONNEG ? c : _mm256_sign_epi8(c, c);
      [[maybe_unused]] const __m256i c1 = W7 ? signed_codes(wq + 128 * q + 128) : c;
      const auto row = [&](__m256i& acc, int r) {
        int32_t v;
        std::memcpy(&v, a[r].q + 4 * q, 4);
        const __m256i av = _mm256_set1_epi32(v);
        if constexpr (W7) {
          int32_t v1;
          std::memcpy(&v1, a[r].q + 4 * q + 4, 4);
          const __m256i pairs =
              _mm256_add_epi16(_mm256_maddubs_epi16(av, c), _mm256_maddubs_epi16(_mm256_set1_epi32(v1), c1));
          acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
        } else if constexpr (kVnni) acc = dot_acc(acc, c, av);
        else if constexpr (NONNEG) acc = dot_acc(acc, av, c);
        else acc = dot_acc(acc, uc, _mm256_sign_epi8(av, c));
      };
      row(s0, 0);
      if constexpr (MR > 1) row(s1, 1);
      if constexpr (MR > 2) row(s2, 2);
      if constexpr (MR > 3) row(s3, 3);
      if constexpr (MR > 4) row(s4, 4);
      if constexpr (MR > 5) row(s5, 5);
      if constexpr (MR > 6) row(s6, 6);
      if constexpr (MR > 7) row(s7, 7);
      keep_in_registers(s0, s1, s2, s3, s4, s5, s6, s7);
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

// The tile for activation codes in [-63, 63] (qmax 63, quantize_act_row): the weight
// codes as packed, c + 128 in [0, 255], go straight into maddubs against the activation
// codes, pairs at most 2 x 255 x 63 = 32130 (no saturation). 3 instructions per row and
// 32 multiply-adds where the sign trick spends 4. The zero point's share, -128 x each
// block's activation codes (its two s16 sums) on the block's scale, is one float per row
// (QActRow::zshare, made by q8_gemm_packed) taken off at the store; every partial sum is
// an integer times a scale, so with unit scales the result is the exact integer dot
// product while the sums of (c + 128) x q stay below 2^24 (K up to about 1000 at the
// extreme 7-bit codes, 500 at 8-bit ones). On AVX-VNNI the same tile is one vpdpbusd per row and 32
// multiply-adds, on 8-bit codes (nothing to saturate). MR (1 to 4) rows by 16 columns,
// every int32 sum named (arrays of them spilled): each broadcast of 4 activation codes
// serves two weight vectors, each weight vector MR rows. On Zen 4 (one thread, 128 x
// 3072 x 768 and 128 x 768 x 768) 2 rows by 16 ran 0.62-0.67x the time of 4 rows by 8
// columns; 32 columns or the quad loop unrolled whole without the register pins below
// (it spilled) were slower. 4 rows by 16, the float sums moved to memory to make room
// (8 int32 sums + 2 weight vectors + broadcast + ones), read the weight's codes from L2
// half as often as 2 rows: one thread over 128 rows and every column block (Zen 4 held
// to AVX2, `u8tile4.cc`), 101-107 GMAC/s at BERT-base's shapes against 85-97 for 2 rows
// (K 3072: 107 against 85), bit-identical; int8-dynamic frozen, calls alternated:
// BERT-base 0.929x the time, all-MiniLM-L6-v2 0.946x at seq 128 and 0.903x at seq 32.
// The narrower codes cost less accuracy than 7-bit weights would: on all-MiniLM-L6-v2
// (real text) 1 - mean cosine to fp32 went 6.4e-4 -> 1.0e-3 with 7-bit activations per
// 32 values, 3.3e-3 with the weights halved to 7 bits.
// W7 (AVX2 only): every weight code within +-63 (PackedOperand::q8_max; zenith.quantize's
// linear_weight_bits=7). The packed codes, c + 128, less 64 are c + 64 in [1, 127], so a
// maddubs pair against activation codes within +-63 is at most 2 x 127 x 63 = 16002 and
// two quads' pairs add in int16 before one madd: 3 instructions of the two multiply
// pipes per row, column vector and 64 multiply-adds where the 8-bit weights spend 4. The
// zero point's share is then 64 x zshare. Zen 3, paired: in L1, one thread, 2 rows, K
// 384-1536: 0.81-0.89x the time on the same codes; int8-dynamic all-MiniLM-L6-v2 s128
// 0.896x [0.871, 0.909], BERT-base 0.878x [0.865, 0.897] (the same 7-bit model either
// way; equal up to float rounding).
// G: blocks of 32 per activation scale (QActRows::group; the rows' d repeats each scale
// per block): the int32 sums run over G blocks before one conversion and FMA by the
// scale, so that per-value-block epilogue (a conversion, a load, an FMA and a store of the
// float sums per row and column vector, beside 16 multiply-pipe instructions a row of a
// block) is paid once per G blocks.
// A last short group (kpad / 32 not a multiple of G) is scaled as it ends. The sums of
// 64 values stay far inside int32 (64 x 255 x 63).
template <int MR, bool W7 = false, int G = 1>
void q8_gemm_tile_u8(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy,
                     int nvalid) {
  static_assert(MR >= 1 && MR <= kMaxNarrowRows && kMaxNarrowRows <= 4);  // 4 rows' sums below, named
  static_assert(!W7 || !kVnni);
  static_assert(G == 1 || G == 2);
  const int8_t* qr[4];  // the rows' codes (entries past MR: the last row's, never read)
  for (int r = 0; r < 4; ++r) qr[r] = a[std::min(r, MR - 1)].q;
  [[maybe_unused]] const __m256i off = _mm256_set1_epi8(64), ones = _mm256_set1_epi16(1);
  const int64_t nb = kpad / 32;
  for (int g = 0; 8 * g < nvalid; g += 2) {  // columns [8g, 8g + 16): bytes [32g, 32g + 64) of each quad
    // The float sums in memory (L1; the registers hold the int32 sums, see above).
    alignas(32) float f[MR][16] = {};
    __m256i s00 = _mm256_setzero_si256(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00,
            s31 = s00;
    for (int64_t b = 0; b < nb; ++b) {
      // the first block of a group starts the sums; the last (or the row's last) scales them
      const bool start = G == 1 || b % G == 0, end = G == 1 || b % G == G - 1 || b == nb - 1;
      if (W7 && start) s00 = s01 = s10 = s11 = s20 = s21 = s30 = s31 = _mm256_setzero_si256();
      const uint8_t* wq = wb + b * 8 * 128 + 32 * g;
      const int64_t o = 32 * b;
      // The block's 8 quads in straight-line code, the first one starting the sums,
      // pinned in registers between quads (keep_in_registers; without it GCC computes
      // many quads' products first and spills them). GCC's loop of 2 quads a
      // step instead spent 4 register moves a step, and zeroed the sums to add into
      // (about 190 instructions a block of the 2-row tile, then about 167). Bit-identical
      // (integer sums). Zen 3, paired rounds: in L1, one thread, 0.91-0.98x the time over
      // K 384-1536, 1.01-1.03x in one quiet minute; int8-dynamic models (frozen, 2
      // threads): in the host's busy minutes all-MiniLM-L6-v2 s128 0.926-0.931x, BERT-base
      // 0.908x; in its calm ones 0.99x. The AVX-VNNI build shares this code (dot4 =
      // vpdpbusd onto zero): compiled and read, not run (no AVX-VNNI here).
      auto quad = [&](int q, bool first) {
        const __m256i w0 = loadu(wq + 128 * q), w1 = loadu(wq + 128 * q + 32);
        const auto row = [&](const int8_t* x, __m256i& t0, __m256i& t1) {
          int32_t v;
          std::memcpy(&v, x + o + 4 * q, 4);
          const __m256i av = _mm256_set1_epi32(v);
          t0 = first ? dot4(w0, av) : dot_acc(t0, w0, av);
          t1 = first ? dot4(w1, av) : dot_acc(t1, w1, av);
        };
        row(qr[0], s00, s01);
        if constexpr (MR > 1) row(qr[1], s10, s11);
        if constexpr (MR > 2) row(qr[2], s20, s21);
        if constexpr (MR > 3) row(qr[3], s30, s31);
      };
      // W7: quads q and q + 1 at a time, each pair summed in int16.
      [[maybe_unused]] auto quads = [&](int q) {
        const __m256i w0 = _mm256_sub_epi8(loadu(wq + 128 * q), off),
                      w1 = _mm256_sub_epi8(loadu(wq + 128 * q + 32), off),
                      v0 = _mm256_sub_epi8(loadu(wq + 128 * q + 128), off),
                      v1 = _mm256_sub_epi8(loadu(wq + 128 * q + 160), off);
        const auto row = [&](const int8_t* x, __m256i& t0, __m256i& t1) {
          int32_t x0, x1;
          std::memcpy(&x0, x + o + 4 * q, 4);
          std::memcpy(&x1, x + o + 4 * q + 4, 4);
          const __m256i a0 = _mm256_set1_epi32(x0), a1 = _mm256_set1_epi32(x1);
          t0 = _mm256_add_epi32(t0, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w0, a0),
                                                                       _mm256_maddubs_epi16(v0, a1)), ones));
          t1 = _mm256_add_epi32(t1, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w1, a0),
                                                                       _mm256_maddubs_epi16(v1, a1)), ones));
        };
        row(qr[0], s00, s01);
        if constexpr (MR > 1) row(qr[1], s10, s11);
        if constexpr (MR > 2) row(qr[2], s20, s21);
        if constexpr (MR > 3) row(qr[3], s30, s31);
      };
      if constexpr (W7) {
#pragma GCC unroll 4
        for (int q = 0; q < 8; q += 2) {
          keep_in_registers(s00, s01, s10, s11, s20, s21, s30, s31);
          quads(q);
        }
      } else {
        if (start) quad(0, true);
        else {
          keep_in_registers(s00, s01, s10, s11, s20, s21, s30, s31);
          quad(0, false);
        }
#pragma GCC unroll 8
        for (int q = 1; q < 8; ++q) {
          keep_in_registers(s00, s01, s10, s11, s20, s21, s30, s31);
          quad(q, false);
        }
      }
      if (!end) continue;
      const __m256i s[4][2] = {{s00, s01}, {s10, s11}, {s20, s21}, {s30, s31}};
      for (int r = 0; r < MR; ++r) {
        const __m256 d = _mm256_set1_ps(a[r].d[b]);
        for (int h = 0; h < 2; ++h)
          _mm256_store_ps(f[r] + 8 * h, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][h]), d, _mm256_load_ps(f[r] + 8 * h)));
      }
    }
    const int n0 = std::min(8, nvalid - 8 * g), n1 = std::min(8, nvalid - 8 * g - 8);
    const __m256 sc0 = _mm256_loadu_ps(ws + 8 * g), sc1 = _mm256_loadu_ps(ws + 8 * g + 8);
    constexpr float zero = W7 ? 64.0f : 128.0f;  // the packed codes' offset as the tile reads them
    for (int r = 0; r < MR; ++r) {
      const __m256 zz = _mm256_set1_ps(zero * a[r].zshare);
      store_first(y + r * ldy + 8 * g, _mm256_mul_ps(_mm256_sub_ps(_mm256_load_ps(f[r]), zz), sc0), n0);
      if (n1 > 0) store_first(y + r * ldy + 8 * g + 8, _mm256_mul_ps(_mm256_sub_ps(_mm256_load_ps(f[r] + 8), zz), sc1), n1);
    }
  }
}

template <bool NONNEG, bool W7, size_t... R>
constexpr std::array<QGemmTileFn, sizeof...(R)> uniform_tiles(std::index_sequence<R...>) {
  return {q8_gemm_tile_uniform<int(R) + 1, NONNEG, W7>...};
}
template <bool W7, int G, size_t... R>
constexpr std::array<QGemmTileFn, sizeof...(R)> u8_tiles(std::index_sequence<R...>) {
  return {q8_gemm_tile_u8<int(R) + 1, W7, G>...};
}
constexpr auto kU8Tiles = u8_tiles<false, 1>(std::make_index_sequence<kMaxNarrowRows>());

// The lanes tile (quant_formats.h) in 256 bits: 8 rows of x per register, kLaneColsAvx2
// weight columns. Per 32-value block and column, 8 broadcast weight quads (unsigned codes
// 0..15) times the rows' quads (signed codes): AVX-VNNI sums them into int32 started from
// the rows' zero point share; AVX2's maddubs pairs (<= 2 x 15 x 127) are summed in int16
// over the block's 8 quads (<= 8 x 3810 = 30480: no wrap), widened once by madd, and the
// share added. Then (d_w x d_x) x sum, added as ref_dot does.
constexpr int kCols8 = kLaneColsAvx2;
void lanes_tile8(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out, uintptr_t next,
                 int64_t next_lines) {
  const int64_t nb = K / 32, per_block = (next_lines + nb - 1) / std::max<int64_t>(nb, 1);
  __m256 acc[kCols8];
  for (int c = 0; c < kCols8; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_block_share(next, next_lines, per_block, b);
    const __m256i z = loadu(a.z + 8 * b);
    __m256i s[kCols8];
    for (int c = 0; c < kCols8; ++c) s[c] = kVnni ? z : _mm256_setzero_si256();
    for (int q = 0; q < 8; ++q) {
      const __m256i av = loadu(a.q + 32 * (8 * b + q));
      for (int c = 0; c < kCols8; ++c) {
        int32_t quad;
        std::memcpy(&quad, codes + c * K + 32 * b + 4 * q, 4);
        const __m256i bw = _mm256_set1_epi32(quad);
#if ZENITH_QUANT_AVXVNNI
        s[c] = _mm256_dpbusd_avx_epi32(s[c], bw, av);
#else
        s[c] = _mm256_add_epi16(s[c], _mm256_maddubs_epi16(bw, av));
#endif
      }
    }
    const __m256 dx = _mm256_loadu_ps(a.d + 8 * b);
    for (int c = 0; c < kCols8; ++c) {
      const __m256i sum = kVnni ? s[c] : _mm256_add_epi32(_mm256_madd_epi16(s[c], _mm256_set1_epi16(1)), z);
      const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(scales[c * nb + b]), dx);
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(scale, _mm256_cvtepi32_ps(sum)));
    }
  }
  for (int c = 0; c < kCols8; ++c) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

const QDotFn* dot_kernels(QFormat f) {
  switch (f) {
    case QFormat::q8_0: return kSmall<QFormat::q8_0>;
    case QFormat::q4_0: return kSmall<QFormat::q4_0>;
    case QFormat::q4_1: return kSmall<QFormat::q4_1>;
    case QFormat::q5_0: return kSmall<QFormat::q5_0>;
    case QFormat::q5_1: return kSmall<QFormat::q5_1>;
    case QFormat::int4_g64: return kSmall<QFormat::int4_g64>;
    case QFormat::int4_g128: return kSmall<QFormat::int4_g128>;
    case QFormat::uint4_g64: return kSmall<QFormat::uint4_g64>;
    case QFormat::uint4_g128: return kSmall<QFormat::uint4_g128>;
    case QFormat::q4_k: return kQ4K;
    case QFormat::q5_k: return kQ5K;
    case QFormat::q6_k: return kQ6K;
    case QFormat::int8: return kInt8;
    case QFormat::nf4: return kNF4Rows;
  }
  return nullptr;
}


}  // namespace

#if ZENITH_QUANT_AVXVNNI
const QGemmTileFn* q8_gemm_tiles_avxvnni() { return kU8Tiles.data(); }

const QGemmTileFn* q8_gemm_tiles_uniform_avxvnni() {
  static constexpr auto kTiles = uniform_tiles<false, false>(std::make_index_sequence<kMaxUniformRows>());
  return kTiles.data();
}

const QDotFn* avxvnni_dot_kernels(QFormat f) { return dot_kernels(f); }

void lanes_tile_avxvnni(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out,
                        uintptr_t next, int64_t next_lines) {
  lanes_tile8(a, codes, scales, K, out, next, next_lines);
}
#else
const QGemmTileFn* q8_gemm_tiles_u8_avx2() { return kU8Tiles.data(); }

const QGemmTileFn* q8_gemm_tiles_u8_w7_avx2() {
  static constexpr auto kTiles = u8_tiles<true, 1>(std::make_index_sequence<kMaxNarrowRows>());
  return kTiles.data();
}

const QGemmTileFn* q8_gemm_tiles_u8_pairs_avx2(bool w7) {
  static constexpr auto k8 = u8_tiles<false, 2>(std::make_index_sequence<kMaxNarrowRows>());
  static constexpr auto k7 = u8_tiles<true, 2>(std::make_index_sequence<kMaxNarrowRows>());
  return w7 ? k7.data() : k8.data();
}

const QGemmTileFn* q8_gemm_tiles_avx2() {
  static constexpr QGemmTileFn kTiles[kMaxDotRows] = {q8_gemm_tile<1>, q8_gemm_tile<2>, q8_gemm_tile<3>, q8_gemm_tile<4>};
  return kTiles;
}

const QGemmTileFn* q8_gemm_tiles_uniform_avx2() {
  static constexpr auto kTiles = uniform_tiles<false, false>(std::make_index_sequence<kMaxUniformRows>());
  return kTiles.data();
}

const QGemmTileFn* q8_gemm_tiles_uniform_nonneg_avx2() {
  static constexpr auto kTiles = uniform_tiles<true, false>(std::make_index_sequence<kMaxUniformRows>());
  return kTiles.data();
}

const QGemmTileFn* q8_gemm_tiles_uniform_w7_avx2() {
  static constexpr auto kTiles = uniform_tiles<true, true>(std::make_index_sequence<kMaxUniformRows>());
  return kTiles.data();
}

const QDotFn* avx2_dot_kernels(QFormat f) { return dot_kernels(f); }

void lanes_tile_avx2(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out,
                     uintptr_t next, int64_t next_lines) {
  lanes_tile8(a, codes, scales, K, out, next, next_lines);
}

// Each 32-value chunk: its 16 bytes of nibbles, low nibbles (values 0..15) then high
// (values 16..31).
void lane_unpack_avx2(QFormat f, const uint8_t* w, int64_t row_bytes, int cols, int width, int64_t K, uint8_t* codes,
                      float* scales) {
  const SmallBlock s = small_block_layout(f);
  const __m128i low = _mm_set1_epi8(15);
  for (int c = 0; c < width; ++c) {
    uint8_t* out = codes + c * K;
    float* sc = scales + c * (K / 32);
    if (c >= cols) {
      std::memset(out, 0, size_t(K));
      std::memset(sc, 0, size_t(K / 32) * sizeof(float));
      continue;
    }
    const uint8_t* row = w + c * row_bytes;
    for (int64_t blk = 0; blk < K / (32 * s.chunks); ++blk) {
      const uint8_t* p = row + blk * s.bytes;
      const float d = f16(p);
      for (int ch = 0; ch < s.chunks; ++ch) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + s.qs + 16 * ch));
        const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low), _mm_and_si128(v, low));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * (blk * s.chunks + ch)), u);
        sc[blk * s.chunks + ch] = d;
      }
    }
  }
}
#endif

}  // namespace zenith::quant

#pragma GCC pop_options
