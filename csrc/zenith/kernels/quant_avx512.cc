// AVX-512 VNNI dot kernels of the formats whose codes are one zero point away from
// unsigned bytes: q4_0, int4_g64, int4_g128 (value d * (q - 8), q an unsigned nibble),
// q5_0 (d * (q - 16), q a nibble plus 16 where the block's bit for the value is set) and
// q8_0, int8 (signed bytes c; c + 128, the sign bit flipped, is unsigned): out[r] =
// w . a[r] for MR = 1..4 activation rows, two 32-value chunks per 512-bit register.
// Chosen at run time where the CPU has AVX512F/BW/VL and AVX512_VNNI (quant.cc;
// ZENITH_NO_AVX512=1 leaves AVX-VNNI or AVX2); the other formats run quant_avx2.cc's kernels there.
//
// Why: the AVX2 kernels of these formats are bound by their instructions, not by memory.
// vpdpbusd multiplies unsigned bytes by signed bytes and adds each 4 products into an
// int32 lane without saturation, so the codes go in as unsigned bytes, with no sign trick
// and no 16-bit pair sums. The zero point's share, -zero x the sum of the activation codes
// (zero 8, 16 or 128), does not depend on the weight, so it is computed once per activation
// row (zero_sums: -zero x the sum of each 4 codes, one int32 per lane, at most 128 x 508
// in size) and starts each chunk pair's accumulator. The integer sum of a chunk is then
// exactly ref_dot's (the sum of (q - zero) x a); only the order of the float sums differs,
// as in the AVX2 kernels. Measured on Zen 5, 2 threads, against the AVX2 kernels
// (/tmp-style scripts in docs/benchmarks/README.md): one row of x (decode GEMV, 2048 x
// 5632 weights) q4_0 / int4_g128 1.5-1.6x, int8 / q8_0 1.4-1.55x; 128 rows (prefill,
// 768 x 768 .. 3072) 1.6-2.0x. q5_0 (Gemma 3 270M's Q4_K_M file: its Q, K, FFN gate and
// up) with this kernel rather than AVX2's: decode 0.967x the time a token (Zen 5, paired,
// docs/benchmarks/2026-12-02-zen5-decode).
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <type_traits>
#include <limits>

#include "zenith/kernels/codes_avx512.h"
#include "zenith/kernels/quant_formats.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
// GCC 12's 512-bit broadcast/insert intrinsics start from a self-initialised
// _mm512_undefined_* value, which -Wmaybe-uninitialized reports (GCC bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace zenith::quant {
namespace {

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// The 64 codes of chunks c and c + 1 (16 bytes of nibbles each, at qs0 and qs1) in value
// order: 128-bit lanes [qs0 low nibbles, qs0 high, qs1 low, qs1 high].
inline __m512i nibbles64(const uint8_t* qs0, const uint8_t* qs1) {
  const __m512i lo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)));
  const __m512i t = _mm512_inserti64x4(lo, hi, 1);
  return _mm512_and_si512(_mm512_srlv_epi64(t, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(15));
}

// Adds chunks b and b + 1 of every row (only b if `single`) into acc: u holds the 64
// weight codes as unsigned bytes (code + zero point; the upper 32 zero if `single`), dw
// the two chunks' weight scales in lanes 0 and 1.
template <int MR, bool single>
inline void rows_fma(__m512i u, __m128 dw, int64_t b, const QActRow* a, __m512 (&acc)[MR]) {
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  for (int r = 0; r < MR; ++r) {
    __m512i qx, dot;
    __m128 da;
    if constexpr (single) {
      qx = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, a[r].q + 32 * b);
      dot = _mm512_maskz_loadu_epi32(0x00FF, a[r].zsum + 8 * b);
      da = _mm_load_ss(a[r].d + b);
    } else {
      qx = _mm512_loadu_si512(a[r].q + 32 * b);
      dot = _mm512_loadu_si512(a[r].zsum + 8 * b);
      da = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a[r].d + b)));  // 8 bytes, unaligned
    }
    dot = _mm512_dpbusd_epi32(dot, u, qx);
    const __m512 scale = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(dw, da)));
    acc[r] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(dot), acc[r]);
  }
}

// Chunks b and b + 1 (b + 1 < nb unless `single`) of a small-block format's row.
template <QFormat F, int MR, bool single>
inline void chunk_pair(const uint8_t* w, int64_t b, const QActRow* a, __m512 (&acc)[MR]) {
  constexpr SmallBlock s = small_block_layout(F);
  static_assert(!s.has_m && (s.int8 || s.qh >= 0 ? s.chunks == 1 : s.offset == 8) &&
                (s.chunks == 1 || s.chunks % 2 == 0));
  const uint8_t* p0 = w + (b / s.chunks) * s.bytes;
  const uint8_t* qs0 = p0 + s.qs + (s.int8 ? 32 : 16) * (b % s.chunks);
  // chunks of one-chunk blocks (q4_0, q8_0) are in consecutive blocks, with their own
  // scales; an even-chunked block holds both chunks of a pair and one scale
  const uint8_t* p1 = s.chunks == 1 ? p0 + s.bytes : p0;
  const uint8_t* qs1 = s.chunks == 1 ? p1 + s.qs : qs0 + 16;
  __m512i u;
  if constexpr (s.int8) {  // signed codes: flip the sign bit, code + 128
    const __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs0));
    const __m256i c1 = single ? _mm256_setzero_si256() : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs1));
    u = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(c0), c1, 1), _mm512_set1_epi8(char(0x80)));
  } else {
    u = nibbles64(qs0, single ? qs0 : qs1);
  }
  if constexpr (s.qh >= 0) {  // q5_0: bit i of a block's u32 is value i's 16s bit
    uint32_t h0, h1 = 0;
    std::memcpy(&h0, p0 + s.qh, 4);
    if constexpr (!single) std::memcpy(&h1, p1 + s.qh, 4);
    u = _mm512_or_si512(u, _mm512_maskz_mov_epi8(__mmask64(h0) | __mmask64(h1) << 32, _mm512_set1_epi8(16)));
  }
  if constexpr (single) u = _mm512_maskz_mov_epi64(0x0F, u);
  // [d0, d1] (f16 -> f32)
  const __m128i dh = _mm_insert_epi16(_mm_cvtsi32_si128(u16_at(p0)), single ? 0 : u16_at(p1), 1);
  rows_fma<MR, single>(u, _mm_cvtph_ps(dh), b, a, acc);
}

template <QFormat F, int MR>
__attribute__((always_inline)) inline void dot_small(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  __m512 acc0[MR], acc1[MR];
  for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const int64_t nb = K / 32;
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {  // two pairs, two sets of accumulators in flight
    chunk_pair<F, MR, false>(w, b, a, acc0);
    chunk_pair<F, MR, false>(w, b + 2, a, acc1);
  }
  if (b + 2 <= nb) {
    chunk_pair<F, MR, false>(w, b, a, acc0);
    b += 2;
  }
  if (b < nb) chunk_pair<F, MR, true>(w, b, a, acc1);
  for (int r = 0; r < MR; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

// int8: an f32 row scale, then K int8 codes (K need not be a multiple of 32: the last
// pair's weight bytes past K are masked to zero; the activation codes there are 0).
template <int MR>
__attribute__((always_inline)) inline void dot_int8(const uint8_t* w, int64_t K, const QActRow* a, float* out) {
  const uint8_t* codes = w + 4;
  __m512 acc0[MR], acc1[MR];
  for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const __m128 ones = _mm_set1_ps(1.0f);
  const int64_t nb = (K + 31) / 32, nfull = K / 64 * 2;  // chunks; chunks in whole 64-byte pairs
  auto pair = [&](int64_t b, __m512 (&acc)[MR]) {
    rows_fma<MR, false>(_mm512_xor_si512(_mm512_loadu_si512(codes + 32 * b), flip), ones, b, a, acc);
  };
  int64_t b = 0;
  for (; b + 4 <= nfull; b += 4) {
    pair(b, acc0);
    pair(b + 2, acc1);
  }
  if (b < nfull) {
    pair(b, acc0);
    b += 2;
  }
  if (b < nb) {  // one or two chunks left, K - 32b < 64 weight bytes
    const __m512i u = _mm512_xor_si512(_mm512_maskz_loadu_epi8((1ull << (K - 32 * b)) - 1, codes + 32 * b), flip);
    if (b + 2 == nb) rows_fma<MR, false>(u, ones, b, a, acc1);
    else rows_fma<MR, true>(_mm512_maskz_mov_epi64(0x0F, u), ones, b, a, acc1);
  }
  float scale;
  std::memcpy(&scale, w, 4);
  for (int r = 0; r < MR; ++r) out[r] = scale * _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

template <int MR, QFormat F>
void over_rows(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t K, const QActRow* a, float* out,
               int64_t ldo) {
  const bool prefetch = rows * row_bytes > kRowPrefetchMinBytes;
  for (int64_t n = 0; n < rows; ++n) {
    float o[MR];
    if (prefetch) prefetch_row_ahead(w + n * row_bytes, row_bytes);
    if constexpr (F == QFormat::int8) dot_int8<MR>(w + n * row_bytes, K, a, o);
    else dot_small<F, MR>(w + n * row_bytes, K, a, o);
    for (int r = 0; r < MR; ++r) out[r * ldo + n] = o[r];
  }
}
template <QFormat F>
constexpr QDotFn kDots[kMaxDotRows] = {over_rows<1, F>, over_rows<2, F>, over_rows<3, F>, over_rows<4, F>};

}  // namespace

void zero_sums_avx512(const int8_t* q, int64_t kpad, int zero, int32_t* out) {
  const __m512i z = _mm512_set1_epi8(char(zero)), none = _mm512_setzero_si512();
  int64_t k = 0;
  for (; k + 64 <= kpad; k += 64)
    _mm512_storeu_si512(out + k / 4, _mm512_sub_epi32(none, _mm512_dpbusd_epi32(none, z, _mm512_loadu_si512(q + k))));
  for (; k < kpad; k += 32) {
    const __m256i t = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(char(zero)),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + k)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k / 4), _mm256_sub_epi32(_mm256_setzero_si256(), t));
  }
}

namespace {

// The int8 GEMM: 32 columns (two registers of 16 int32 sums) by MR rows, one 32-value
// block of K at a time: 8 quads of 4 codes, each a broadcast of 4 activation codes and
// two vpdpbusd per row; then each block's int32 sums are scaled by the row's activation
// scale into float accumulators. 512 multiply-adds per row and block in 8 vpdpbusd, where
// the dot kernels above spend a vpdpbusd, a convert and an FMA on 64. The zero point's
// share, -128 x each block's activation codes on the block's scale, is one float per row
// (QActRow::zshare) taken off at the store, as in the narrow AVX2 / AVX-VNNI tiles, rather
// than a broadcast starting every block's sums: 0.93-0.98x the time (Sapphire
// Rapids-class Xeon, 2 threads, BERT-base's 128-row shapes, processes alternated).
template <int MR>
void q8_gemm_tile(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, float* y, int64_t ldy,
                  int nvalid) {
  __m512 f[MR][2];
  for (int r = 0; r < MR; ++r) f[r][0] = f[r][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < kpad / 32; ++b) {
    __m512i s[MR][2];
    for (int r = 0; r < MR; ++r) s[r][0] = s[r][1] = _mm512_setzero_si512();
    const uint8_t* wq = wb + b * 8 * 128;
    for (int q = 0; q < 8; ++q) {
      const __m512i w0 = _mm512_loadu_si512(wq + 128 * q), w1 = _mm512_loadu_si512(wq + 128 * q + 64);
      for (int r = 0; r < MR; ++r) {
        int32_t v;
        std::memcpy(&v, a[r].q + 32 * b + 4 * q, 4);
        const __m512i av = _mm512_set1_epi32(v);
        s[r][0] = _mm512_dpbusd_epi32(s[r][0], w0, av);
        s[r][1] = _mm512_dpbusd_epi32(s[r][1], w1, av);
      }
    }
    for (int r = 0; r < MR; ++r) {
      const __m512 d = _mm512_set1_ps(a[r].d[b]);
      f[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][0]), d, f[r][0]);
      f[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][1]), d, f[r][1]);
    }
  }
  const __m512 s0 = _mm512_loadu_ps(ws), s1 = _mm512_loadu_ps(ws + 16);
  const __mmask16 m0 = nvalid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nvalid) - 1);
  const __mmask16 m1 = nvalid >= 32 ? __mmask16(0xFFFF) : nvalid > 16 ? __mmask16((1u << (nvalid - 16)) - 1) : 0;
  for (int r = 0; r < MR; ++r) {  // less the zero point's share, 128 x QActRow::zshare
    const __m512 z = _mm512_set1_ps(128.0f * a[r].zshare);
    _mm512_mask_storeu_ps(y + r * ldy, m0, _mm512_mul_ps(_mm512_sub_ps(f[r][0], z), s0));
    _mm512_mask_storeu_ps(y + r * ldy + 16, m1, _mm512_mul_ps(_mm512_sub_ps(f[r][1], z), s1));
  }
}

// acc += w . a in place. GCC 12 treats the intrinsic's accumulator as a fresh output and,
// with 16 of them live, copies registers around every one and spills; the asm pins it.
inline void dpbusd_acc(__m512i& acc, __m512i w, __m512i a) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(a));
}
// 4 int8 codes as one int32 (memcpy: no aliasing question; one load).
inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// int32 -> float (masked: the plain convert's undefined pass-through trips GCC 12's
// -Wuninitialized once its input comes out of asm).
inline __m512 to_float(__m512i v) { return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v); }

// The same for rows whose blocks share one scale (a[r].d[0]: static INT8, dynamic INT8
// per row, and conv2d's per-image scale), up to 12 rows: the int32 sums run over the
// whole K (at most 255 x 127 x K, far from overflow for any K a layer has) and are scaled
// once, and each weight quad loaded serves up to 12 rows (24 vpdpbusd per two 64-byte
// loads, where 4 rows left the tile waiting on L2 for weights that outgrow L1). The zero
// point's share of the whole row starts the accumulators.
// (noinline: inlined into q8_gemm_codes_tile, GCC kept its accumulators in memory)
template <int MR>
__attribute__((noinline)) void q8_gemm_tile_uniform(const uint8_t* wb, const float* ws, int64_t kpad,
                                                    const QActRow* a, float* y, int64_t ldy, int nvalid) {
  // One array per column half (a 2-D array of accumulators made GCC copy registers
  // around every vpdpbusd and spill), the row loops unrolled whole: every tile height up
  // to 12 keeps its accumulators in registers (objdump: no stack access in the loop; the
  // 8- and 12-row tiles whose accumulators were named one by one ran no faster).
  __m512i lo[MR], hi[MR];
  const int8_t* aq[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    lo[r] = hi[r] = _mm512_set1_epi32(-128 * a[r].total);
    aq[r] = a[r].q;
  }
  // The row's runs (QActRow::nseg; one but for conv2d_int8's direct rows), the weight's
  // quads in order across them.
  const int nseg = a[0].nseg;
  const int64_t quads = kpad / 4 / nseg, stride = a[0].seg_stride;
  for (int s = 0; s < nseg; ++s, wb += 128 * quads) {
    for (int64_t q = 0; q < quads; ++q) {
      const __m512i w0 = _mm512_loadu_si512(wb + 128 * q), w1 = _mm512_loadu_si512(wb + 128 * q + 64);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i av = _mm512_set1_epi32(load_i32(aq[r] + 4 * q));
        dpbusd_acc(lo[r], w0, av);
        dpbusd_acc(hi[r], w1, av);
      }
    }
    if (s + 1 < nseg)  // (not past the last run: that address may lie past the buffer)
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) aq[r] += stride;
  }
  const __m512 s0 = _mm512_loadu_ps(ws), s1 = _mm512_loadu_ps(ws + 16);
  const __mmask16 m0 = nvalid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nvalid) - 1);
  const __mmask16 m1 = nvalid >= 32 ? __mmask16(0xFFFF) : nvalid > 16 ? __mmask16((1u << (nvalid - 16)) - 1) : 0;
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    const __m512 d = _mm512_set1_ps(a[r].d[0]);
    _mm512_mask_storeu_ps(y + r * ldy, m0, _mm512_mul_ps(_mm512_mul_ps(to_float(lo[r]), d), s0));
    _mm512_mask_storeu_ps(y + r * ldy + 16, m1, _mm512_mul_ps(_mm512_mul_ps(to_float(hi[r]), d), s1));
  }
}

// QCodesOut's epilogue over rows of a tile's floats f [rows, 32] (two vectors a row,
// masks m0 and m1 for the valid columns): vpmovsdb's saturation makes INT_MIN, a NaN's
// conversion, -128, as conv2d_int8's saturating packs do.
void codes_out_rows(const float* f, int rows, __mmask16 m0, __mmask16 m1, const QCodesOut& o) {
  const __m512 sc0 = _mm512_maskz_loadu_ps(m0, o.scale), sc1 = _mm512_maskz_loadu_ps(m1, o.scale + 16);
  const __m512 sh0 = _mm512_maskz_loadu_ps(m0, o.shift), sh1 = _mm512_maskz_loadu_ps(m1, o.shift + 16);
  const __m512 vinv = _mm512_set1_ps(o.inv), rs = _mm512_set1_ps(o.r_scale);
  const int8_t* res = o.res;  // (locals: the int8 stores below may alias the fields)
  int8_t* y = o.y;
  const int64_t ld = o.ld;
  const bool relu = o.relu;
  for (int r = 0; r < rows; ++r) {
    const int8_t* rr = res ? res + r * ld : nullptr;
    codes16(_mm512_fmadd_ps(_mm512_load_ps(f + 32 * r), sc0, sh0), rr, rs, relu, vinv, y + r * ld, m0);
    if (m1)
      codes16(_mm512_fmadd_ps(_mm512_load_ps(f + 32 * r + 16), sc1, sh1), rr ? rr + 16 : nullptr, rs, relu, vinv,
              y + r * ld + 16, m1);
  }
}

// The uniform tile writing codes (QCodesOut): its floats into a block on the stack, then
// through the conv's epilogue out as codes, in place of conv2d_int8's second pass over an
// L2 buffer of floats (store_blocked). ResNet-50 int8-static, Zen 4, calls alternated
// in one process: batch 8 0.937x the time, batch 1 1.00x, the same outputs bit for bit. (The epilogue written into the tile's own store loop kept all 24 accumulators in
// memory through its K loop: too many vectors live at its end; so does the tile inlined
// here.)
template <int MR>
void q8_gemm_codes_tile(const uint8_t* wb, const float* ws, int64_t kpad, const QActRow* a, const QCodesOut& o,
                        int nvalid) {
  alignas(64) float block[MR * 32];
  q8_gemm_tile_uniform<MR>(wb, ws, kpad, a, block, 32, nvalid);
  const __mmask16 m0 = nvalid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nvalid) - 1);
  const __mmask16 m1 = nvalid >= 32 ? __mmask16(0xFFFF) : nvalid > 16 ? __mmask16((1u << (nvalid - 16)) - 1) : 0;
  codes_out_rows(block, MR, m0, m1, o);
}

// The lanes tile (quant_formats.h): 16 rows of x in each register's lanes, 8 weight
// columns. Per 32-value block and column: the zero point's share of the 16 rows starts
// the int32 sums, 8 vpdpbusd of a broadcast weight quad (unsigned codes 0..15) by the
// rows' quads (signed codes), then the sums are scaled by the rows' block scales times
// the column's, and added: (d_w x d_x) x sum, as ref_dot does.
constexpr int kCols = kMaxLaneCols;
}  // namespace

void lanes_tile_avx512(const QLaneRows& a, const uint8_t* codes, const float* scales, int64_t K, float* out,
                       uintptr_t next, int64_t next_lines) {
  const int64_t nb = K / 32, per_block = (next_lines + nb - 1) / std::max<int64_t>(nb, 1);
  __m512 acc[kCols];
  const uint8_t* wc[kCols];
  const float* ws[kCols];
#pragma GCC unroll 8
  for (int c = 0; c < kCols; ++c) {
    acc[c] = _mm512_setzero_ps();
    wc[c] = codes + c * K;
    ws[c] = scales + c * nb;
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_block_share(next, next_lines, per_block, b);
    __m512i s[kCols];
    const __m512i z = _mm512_loadu_si512(a.z + 16 * b);
#pragma GCC unroll 8
    for (int c = 0; c < kCols; ++c) s[c] = z;
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const __m512i av = _mm512_loadu_si512(a.q + 64 * (8 * b + q));
#pragma GCC unroll 8
      for (int c = 0; c < kCols; ++c)
        dpbusd_acc(s[c], _mm512_set1_epi32(load_i32(reinterpret_cast<const int8_t*>(wc[c]) + 32 * b + 4 * q)), av);
    }
    const __m512 dx = _mm512_loadu_ps(a.d + 16 * b);
#pragma GCC unroll 8
    for (int c = 0; c < kCols; ++c)
      acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(ws[c][b]), dx), to_float(s[c])));
  }
#pragma GCC unroll 8
  for (int c = 0; c < kCols; ++c) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

// The activation quantizer (quantize_act_row's contract, equal to it value for value):
// 32 values at a time as two 16-float registers, each block checked for inf / NaN with
// one compare into a mask, its max|x| (dynamic scales only) reduced once per block, codes
// made with the same multiply, clamp and round-half-to-even convert as the AVX2 kernel,
// and the 16-sums taken from sad over the codes as unsigned bytes (code + 128: each
// 8-byte sum is 1024 over the codes' sum). AVX-512 VNNI quantizes rows of x with it: the
// dot kernels' decode rows and the int8 GEMM's rows of a scale per block, and those of one
// scale that quantize_uniform_row_avx512 (below) leaves to it (a NaN or infinity, K not a
// whole number of 32s). (At all-MiniLM-L6-v2's seq-128 shapes its quantizer, on AVX2's,
// was ~10% of qmatmul's time.)
namespace {
inline void quantize32_avx512(const float* x, __m512 id, __m512 hi, int8_t* q, int16_t* s16) {
  const __m512 lo = _mm512_sub_ps(_mm512_setzero_ps(), hi);
  const __m512i v0 = _mm512_cvtps_epi32(_mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_mul_ps(_mm512_loadu_ps(x), id))));
  const __m512i v1 =
      _mm512_cvtps_epi32(_mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_mul_ps(_mm512_loadu_ps(x + 16), id))));
  const __m256i codes = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(v0)),
                                                _mm512_cvtepi32_epi8(v1), 1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), codes);
  // qwords: sums of 8 codes + 1024 each; adjacent pairs added in each 128-bit lane
  const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(codes, _mm256_set1_epi8(char(0x80))), _mm256_setzero_si256());
  const __m256i pairs = _mm256_add_epi64(sad, _mm256_shuffle_epi32(sad, _MM_SHUFFLE(1, 0, 3, 2)));
  s16[0] = int16_t(_mm256_extract_epi16(pairs, 0) - 2048);
  s16[1] = int16_t(_mm256_extract_epi16(pairs, 8) - 2048);
}
}  // namespace

void quantize_act_row_avx512(const float* x, int64_t K, int64_t block, int8_t* q, float* d, int16_t* s16,
                             float scale, int qmax) {
  const float top = float(qmax);
  const __m512 big = _mm512_set1_ps(FLT_MAX);
  const int64_t full = K / block * block;
  for (int64_t b0 = 0; b0 < full; b0 += block) {
    __m512 amax = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (int64_t k = b0; k < b0 + block; k += 16) {
      const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(x + k));
      if (!(scale > 0.0f)) amax = _mm512_max_ps(amax, a);  // as the reference: a NaN scale is none
      bad |= _mm512_cmp_ps_mask(a, big, _CMP_NLE_UQ);  // inf or NaN
    }
    const float m = scale > 0.0f ? top * scale : _mm512_reduce_max_ps(amax);
    const bool finite = bad == 0;
    const float id = act_block_multiplier(m, finite, scale, top, d + b0 / block);
    if (id == 0.0f) {
      std::memset(q + b0, 0, size_t(block));
      std::memset(s16 + b0 / 16, 0, size_t(block / 16) * sizeof(int16_t));
      continue;
    }
    for (int64_t k = b0; k < b0 + block; k += 32)
      quantize32_avx512(x + k, _mm512_set1_ps(id), _mm512_set1_ps(top), q + k, s16 + k / 16);
  }
  if (full < K)  // a short last block (int8 rows of any K): the reference
    quantize_act_row(x + full, K - full, block, q + full, d + full / block, s16 + full / 16, scale, qmax);
}

bool quantize_uniform_row_avx512(const float* x, const float* mul, int64_t K, float id, int qmax, int8_t* q,
                                 int32_t* total) {
  const __m512 vid = _mm512_set1_ps(id), hi = _mm512_set1_ps(float(qmax)), lo = _mm512_sub_ps(_mm512_setzero_ps(), hi);
  const __m512 big = _mm512_set1_ps(FLT_MAX);
  __mmask16 bad = 0;
  __m512i sum = _mm512_setzero_si512();
  const auto run = [&](auto with_mul) {
    for (int64_t k = 0; k < K; k += 16) {
      __m512 a = _mm512_loadu_ps(x + k);
      if constexpr (decltype(with_mul)::value) a = _mm512_mul_ps(a, _mm512_loadu_ps(mul + k));
      bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(a), big, _CMP_NLE_UQ);  // inf or NaN
      const __m512i v = _mm512_cvtps_epi32(_mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_mul_ps(a, vid))));
      sum = _mm512_add_epi32(sum, v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), _mm512_cvtepi32_epi8(v));
    }
  };
  if (mul) run(std::true_type{});
  else run(std::false_type{});
  // (A NaN's lanes hold INT_MIN: the sum is not the row's then, and its reduction, signed
  // lanes added in C, would overflow.)
  if (bad) return false;
  *total = _mm512_reduce_add_epi32(sum);
  return true;
}

float act_row_scale_avx512(const float* x, int64_t K, int qmax) {
  __m512 m0 = _mm512_setzero_ps(), m1 = m0;
  int64_t k = 0;
  // max(a, m): a NaN lane of a leaves m as it was, as the reference's comparison does.
  for (; k + 32 <= K; k += 32) {
    m0 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + k)), m0);
    m1 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + k + 16)), m1);
  }
  for (; k < K; k += 16) {  // the tail, masked: lanes past K load as 0
    const __mmask16 live = K - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (K - k)) - 1);
    m0 = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(live, x + k)), m0);
  }
  return act_row_scale_of_max(_mm512_reduce_max_ps(_mm512_max_ps(m0, m1)), qmax);
}

const QGemmTileFn* q8_gemm_tiles_avx512() {
  static constexpr QGemmTileFn kTiles[kMaxDotRows] = {q8_gemm_tile<1>, q8_gemm_tile<2>, q8_gemm_tile<3>, q8_gemm_tile<4>};
  return kTiles;
}

const QGemmCodesTileFn* q8_gemm_codes_tiles_avx512() {
  static constexpr QGemmCodesTileFn kTiles[kMaxUniformRowsAvx512] = {
      q8_gemm_codes_tile<1>, q8_gemm_codes_tile<2>,  q8_gemm_codes_tile<3>,  q8_gemm_codes_tile<4>,
      q8_gemm_codes_tile<5>, q8_gemm_codes_tile<6>,  q8_gemm_codes_tile<7>,  q8_gemm_codes_tile<8>,
      q8_gemm_codes_tile<9>, q8_gemm_codes_tile<10>, q8_gemm_codes_tile<11>, q8_gemm_codes_tile<12>};
  return kTiles;
}

const QGemmTileFn* q8_gemm_tiles_uniform_avx512() {
  static constexpr QGemmTileFn kTiles[kMaxUniformRowsAvx512] = {
      q8_gemm_tile_uniform<1>, q8_gemm_tile_uniform<2>,  q8_gemm_tile_uniform<3>,  q8_gemm_tile_uniform<4>,
      q8_gemm_tile_uniform<5>, q8_gemm_tile_uniform<6>,  q8_gemm_tile_uniform<7>,  q8_gemm_tile_uniform<8>,
      q8_gemm_tile_uniform<9>, q8_gemm_tile_uniform<10>, q8_gemm_tile_uniform<11>, q8_gemm_tile_uniform<12>};
  return kTiles;
}

const QDotFn* avx512_dot_kernels(QFormat f) {
  switch (f) {
    case QFormat::q8_0: return kDots<QFormat::q8_0>;
    case QFormat::q4_0: return kDots<QFormat::q4_0>;
    case QFormat::q5_0: return kDots<QFormat::q5_0>;
    case QFormat::int8: return kDots<QFormat::int8>;
    case QFormat::int4_g64: return kDots<QFormat::int4_g64>;
    case QFormat::int4_g128: return kDots<QFormat::int4_g128>;
    default: return nullptr;
  }
}

}  // namespace zenith::quant

#pragma GCC pop_options
