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
//   signed codes c (q8_0 [-128, 127], q4_0 / int4 [-8, 7], q5_0 [-16, 15], int8): the sign
//     trick, maddubs(|c|, sign(q, c)): |c| <= 128 as unsigned, sign(q, c) in [-127, 127],
//     pairs <= 2 * 128 * 127 = 32512;
//   unsigned codes u (q4_1, uint4 [0, 15], q5_1 [0, 31], q4_k [0, 15], q5_k [0, 31],
//     q6_k [0, 63]): maddubs(u, q), pairs <= 2 * 63 * 127 = 16002.
// test_quant.cc's worst-case test holds each format at its extreme codes and scales
// against +-127 activations and compares with the scalar reference exactly.
// int32 sums: a k-quant super-block's scaled sum stays below 2^29 (q6_k: 16 groups of
// 16 x 63 x 127 times |scale| <= 128, plus 32 x the sums of q x scale).
//
// nf4 multiplies floats (its levels are not integers): the 16 levels sit in two
// registers and _mm256_permutevar8x32_ps looks a code up in each, bit 3 choosing
// between them; the levels times absmax are FMAed with x. An int8 table would not be
// exact.
//
// Why the decode path quantizes x rather than dequantizing w to floats: one row of x
// against a weight is bound by reading the weight (it streams from memory once), and
// integer products of 32 bytes take 2 instructions where floats take 8 conversions and 4
// FMAs; measured numbers are in docs/benchmarks (see quant.cc's header for the shapes).
#include <immintrin.h>

#include <cstring>

#include "zenith/kernels/quant_formats.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace zenith::quant {
namespace {

inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

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
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}

// Bit j of qh as byte j: 0x10 where set, 0 where not (the 5th bit of q5_0 / q5_1 codes).
inline __m256i fifth_bits(uint32_t qh) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(qh)), spread);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
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
    if constexpr (s.qh >= 0) {
      uint32_t qh;
      std::memcpy(&qh, p + s.qh, 4);
      codes = _mm256_or_si256(codes, fifth_bits(qh));
    }
    if constexpr (!s.has_m) codes = _mm256_sub_epi8(codes, _mm256_set1_epi8(char(s.offset)));
  }
  const __m256i ux = s.has_m ? codes : _mm256_sign_epi8(codes, codes);  // |codes| (-128 reads as 128)
  const float d = f16(p);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int r = 0; r < MR; ++r) {
    __m256i qx = loadu(a[r].q + 32 * b);
    if constexpr (!s.has_m) qx = _mm256_sign_epi8(qx, codes);
    const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(ux, qx), ones);
    const float da = a[r].d[b];
    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(dot), acc[r]);
    if constexpr (s.has_m) accm[r] += (f16(p + 2) * da) * float(a[r].s16[2 * b] + a[r].s16[2 * b + 1]);
  }
}

template <QFormat F, int MR>
void dot_small(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
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
// last chunk is scalar).
template <int MR>
inline void int8_chunk(const uint8_t* codes_at, int64_t b, const QActRow* a, __m256 (&acc)[MR]) {
  const __m256i codes = loadu(codes_at + 32 * b);
  const __m256i ux = _mm256_sign_epi8(codes, codes);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int r = 0; r < MR; ++r) {
    const __m256i qx = _mm256_sign_epi8(loadu(a[r].q + 32 * b), codes);
    const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(ux, qx), ones);
    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(a[r].d[b]), _mm256_cvtepi32_ps(dot), acc[r]);
  }
}

template <int MR>
void dot_int8(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
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
  float scale;
  std::memcpy(&scale, w, 4);
  for (int r = 0; r < MR; ++r) {
    float y = hsum(_mm256_add_ps(acc0[r], acc1[r]));
    if (nb * 32 < K) {
      int32_t dot = 0;
      for (int64_t k = nb * 32; k < K; ++k) dot += int8_t(codes[k]) * a[r].q[k];
      y += a[r].d[nb] * float(dot);
    }
    out[r] = scale * y;
  }
}

// ---- k-quants: one integer per super-block and row, then ref_dot's float formula ----
// q4_k / q5_k: sub-blocks (2i, 2i + 1) are the low and high nibbles of 32 bytes; the
// scaled sums go through madd by the sub-block's scale, the mins through the 16-sums.
template <bool FIVE, int MR>
void dot_q45k(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  constexpr int64_t kBytes = FIVE ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
  constexpr size_t kQs = FIVE ? offsetof(BlockQ5K, qs) : offsetof(BlockQ4K, qs);
  const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  const __m128i pairs = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  float y[MR] = {};
  for (int64_t sb = 0; sb < K / 256; ++sb) {
    const uint8_t* p = w + sb * kBytes;
    alignas(16) uint8_t sc[16] = {}, mn[16] = {};
    unpack_q4k_scales(p + 4, sc, mn);
    // mins as 16 int16 lanes, min j twice: madd with the 16-sums gives min_j x sum_j.
    const __m256i mins =
        _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(mn)), pairs));
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
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * i]), s_hi = _mm256_set1_epi16(sc[2 * i + 1]);
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
void dot_q6k(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
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
template <int MR>
void dot_nf4(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  const __m256 lo_levels = _mm256_loadu_ps(kNF4), hi_levels = _mm256_loadu_ps(kNF4 + 8);
  const __m128i m4 = _mm_set1_epi8(15);
  __m256 acc0[MR], acc1[MR];
  for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < K / 64; ++g) {
    const uint8_t* p = w + g * int64_t(sizeof(BlockNF4));
    const __m256 absmax = _mm256_set1_ps(f16(p));
    for (int c = 0; c < 2; ++c) {
      const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + 16 * c));
      const __m128i lo = _mm_and_si128(t, m4), hi = _mm_and_si128(_mm_srli_epi16(t, 4), m4);
      // values 0-7, 8-15 (low nibbles), 16-23, 24-31 (high nibbles) of the chunk
      const __m128i part[4] = {lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)};
      for (int v = 0; v < 4; ++v) {
        const __m256i code = _mm256_cvtepu8_epi32(part[v]);
        const __m256 level = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo_levels, code),
                                              _mm256_permutevar8x32_ps(hi_levels, code),
                                              _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)));
        const __m256 wv = _mm256_mul_ps(level, absmax);
        const int64_t k = 64 * g + 32 * c + 8 * v;
        for (int r = 0; r < MR; ++r) {
          if (v & 1) acc1[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[r].x + k), acc1[r]);
          else acc0[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[r].x + k), acc0[r]);
        }
      }
    }
  }
  for (int r = 0; r < MR; ++r) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
}

template <QFormat F>
constexpr QDotFn kSmall[kMaxDotRows] = {dot_small<F, 1>, dot_small<F, 2>, dot_small<F, 3>, dot_small<F, 4>};
constexpr QDotFn kInt8[kMaxDotRows] = {dot_int8<1>, dot_int8<2>, dot_int8<3>, dot_int8<4>};
constexpr QDotFn kQ4K[kMaxDotRows] = {dot_q45k<false, 1>, dot_q45k<false, 2>, dot_q45k<false, 3>, dot_q45k<false, 4>};
constexpr QDotFn kQ5K[kMaxDotRows] = {dot_q45k<true, 1>, dot_q45k<true, 2>, dot_q45k<true, 3>, dot_q45k<true, 4>};
constexpr QDotFn kQ6K[kMaxDotRows] = {dot_q6k<1>, dot_q6k<2>, dot_q6k<3>, dot_q6k<4>};
constexpr QDotFn kNF4Rows[kMaxDotRows] = {dot_nf4<1>, dot_nf4<2>, dot_nf4<3>, dot_nf4<4>};

}  // namespace

const QDotFn* avx2_dot_kernels(QFormat f) {
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

}  // namespace zenith::quant

#pragma GCC pop_options
