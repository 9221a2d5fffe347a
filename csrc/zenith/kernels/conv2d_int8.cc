// conv2d with an int8 weight (quant_formats' int8 rows: per output channel an f32 scale,
// then C * KH * KW codes in torch's (channel, kernel row, kernel column) order) and int8
// activations: x quantized with one scale per image, either given (static INT8, from
// calibration) or max|x| / 127 of the image (dynamic), symmetric, so a padded zero is
// code 0. The sums are exact int32 dot products (the int8 GEMM tiles of quant.cc); the
// scales, bias, batch-norm, residual and activation are applied to each block of the
// output as it leaves the tile.
//
// Layout: each image is quantized once into pixels x channels (NHWC) codes; a row of the
// GEMM is then one output pixel's window, KH * KW runs of C codes copied whole, so the
// filters are packed in (kernel row, kernel column, channel) order to match. Output
// pixels are the GEMM's rows and channels its columns; blocks are transposed into NCHW
// (or, blocked, copied a pixel's channel block at a time) as they are finished. A window touching a NaN or infinite input gives that output
// pixel NaN in every channel (its scales are NaN), as float arithmetic would.
//
// Between int8 convs (conv2d_int8 with Conv2dInt8Codes), the codes themselves pass: a conv
// writes its output as the next conv's input codes [N, H, W, C] (1 byte a value, not 4,
// and no quantizer pass in the next conv), which the next takes as it would its own codes
// (rows read in place, window rows built from them; a strided 1x1 copies the pixels it
// reads), or as its residual.
//
// Over the blocked layout (g.L: x, the residual and y [N, ceil(C / L), H, W, L], as
// conv2d_nchwc keeps them between convs) a pixel's channels of a block lie in a row in
// both the float tensors and the codes, so the quantizer reads L floats and writes L
// codes at a time, and the write-out copies a pixel's L results with the epilogue in the
// same pass: neither transposes. (Over NCHW, ResNet-50's 1x1 convs at batch 8 spent
// 17-60% of their time in the quantizer's transposes and 50% in the write-out's, the
// int8 GEMM 9-11%; AMD Zen 5, 2 threads.) A stem reads its NCHW image and writes the
// blocked layout (g.x_nchw), so the blocked max pool after it reads its output as it is.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/codes_avx512.h"
#include "zenith/kernels/conv2d_nchwc_internal.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"

namespace zenith {

using gemm_detail::AlignedBuf;
using gemm_detail::load8;
using gemm_detail::store8;
using gemm_detail::v8f;
using gemm_detail::transpose_block;
using quant::QActRow;

namespace {

// The int8 rows [OC, 4 + K] with each row's codes reordered (ic, kh, kw) -> (kh, kw, ic).
std::vector<uint8_t> reorder_filters(const Conv2dInt8Geom& g, const uint8_t* w) {
  const int64_t K = g.K(), rb = 4 + K, KK = g.KH * g.KW;
  std::vector<uint8_t> out(size_t(g.OC * rb));
  for (int64_t oc = 0; oc < g.OC; ++oc) {
    const uint8_t* src = w + oc * rb;
    uint8_t* dst = out.data() + oc * rb;
    std::memcpy(dst, src, 4);
    for (int64_t ic = 0; ic < g.C; ++ic)
      for (int64_t t = 0; t < KK; ++t) dst[4 + t * g.C + ic] = src[4 + ic * KK + t];
  }
  return out;
}

// One code: round half to even, clamped to [-127, 127] (NaN: 0; its pixel is flagged).
inline int8_t code_of(float v, float inv) {
  const float r = std::nearbyint(v * inv);
  return int8_t(r >= 127.0f ? 127 : r <= -127.0f ? -127 : r == r ? int(r) : 0);
}

inline bool finite(float v) { return std::fabs(v) <= std::numeric_limits<float>::max(); }

// One value's code into *dst, its sign or-ed into neg, a NaN or infinity into bad.
inline void quantize1(float v, float inv, int8_t* dst, bool& neg, uint8_t& bad) {
  *dst = code_of(v, inv);
  neg |= *dst < 0;
  bad |= uint8_t(!finite(v));
}

// Pixels [p0, p1) of image x [C, HW] into codes [HW, C] (q points at pixel 0's) with
// 1 / scale = inv, and bad[p] = 1 where pixel p holds a NaN or infinity in any channel.
// With sub = {OW, sh, sw, W}, pixel p is the input's pixel (p / OW * sh, p % OW * sw) (a
// 1x1 conv with a stride reads only those), gathered value by value into the 8 x 8 block;
// else pixel p. AVX2: blocks of 8 pixels x 8 channels transposed in registers (or
// gathered), then quantized a pixel (8 channels) at a time; the same codes as code_of
// (vcvtps2dq rounds half to even).
// Returns whether any code is negative.
struct Subsample {
  int64_t OW = 0, sh = 1, sw = 1, W = 0;
  bool on() const { return OW > 0; }
  int64_t src(int64_t p) const { return p / OW * sh * W + p % OW * sw; }
};
#if defined(__AVX2__)
// 8 values' codes (code_of's for finite values, as vcvtps2dq rounds half to even; clamped
// before the conversion, which would turn a product past 2^31 into INT_MIN; a NaN lane
// -127, its pixel flagged) and the lanes holding a NaN or infinity.
inline __m128i codes8(__m256 v, __m256 vinv, int& nonfinite) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  nonfinite = _mm256_movemask_ps(
      _mm256_cmp_ps(_mm256_and_ps(v, absmask), _mm256_set1_ps(std::numeric_limits<float>::max()), _CMP_NLE_UQ));
  const __m256 r =
      _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, vinv), _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  const __m256i c = _mm256_cvtps_epi32(r);
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
  return _mm_packs_epi16(w, w);
}
// 8 values into 8 codes at dst, their signs or-ed into `signs`; whether any is NaN or infinite.
inline bool quantize8(__m256 v, __m256 vinv, int8_t* dst, __m128i& signs) {
  int nonfinite;
  const __m128i b = codes8(v, vinv, nonfinite);
  signs = _mm_or_si128(signs, b);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), b);
  return nonfinite != 0;
}
#endif
bool quantize_pixels(const float* x, int64_t C, int64_t HW, int64_t p0, int64_t p1, float inv, int8_t* q,
                     uint8_t* bad, const Subsample& sub) {
  std::fill(bad + p0, bad + p1, uint8_t(0));
  auto at = [&](int64_t c, int64_t p) { return x[c * HW + (sub.on() ? sub.src(p) : p)]; };
  int64_t c8 = 0;
  bool neg = false;
#if defined(__AVX2__)
  c8 = C / 8 * 8;
  const __m256 vinv = _mm256_set1_ps(inv);
  __m128i signs = _mm_setzero_si128();
  alignas(32) float t[64];
  int64_t p = p0;
  for (; p + 8 <= p1; p += 8) {
    int64_t src[8];
    for (int j = 0; j < 8; ++j) src[j] = sub.on() ? sub.src(p + j) : p + j;
    for (int64_t c0 = 0; c0 < c8; c0 += 8) {
      if (sub.on()) {  // t[j * 8 + c]: pixel p + j, channel c0 + c
        for (int c = 0; c < 8; ++c)
          for (int j = 0; j < 8; ++j) t[j * 8 + c] = x[(c0 + c) * HW + src[j]];
      } else {
        gemm_detail::transpose_8x8(x + c0 * HW + p, HW, t, 8);
      }
      for (int j = 0; j < 8; ++j)
        bad[p + j] |= uint8_t(quantize8(_mm256_load_ps(t + 8 * j), vinv, q + (p + j) * C + c0, signs));
    }
  }
  neg = (_mm_movemask_epi8(signs) & 0xff) != 0;
  for (; p < p1; ++p)  // the last pixels, fewer than 8
    for (int64_t c = 0; c < c8; ++c) quantize1(at(c, p), inv, q + p * C + c, neg, bad[p]);
#endif
  for (int64_t c = c8; c < C; ++c)  // channels past the last 8 (all of them without AVX2)
    for (int64_t p = p0; p < p1; ++p) quantize1(at(c, p), inv, q + p * C + c, neg, bad[p]);
  return neg;
}

// quantize_pixels over a blocked image x [ceil(C / L), HW, L]: block by block, each
// pixel's L channels (C % L in a last, partial block) read in a row.
bool quantize_pixels_blocked(const float* x, int64_t C, int64_t L, int64_t HW, int64_t p0, int64_t p1, float inv,
                             int8_t* q, uint8_t* bad, const Subsample& sub) {
  std::fill(bad + p0, bad + p1, uint8_t(0));
  bool neg = false;
#if defined(__AVX2__)
  const __m256 vinv = _mm256_set1_ps(inv);
  __m128i signs = _mm_setzero_si128();
#endif
  for (int64_t c0 = 0; c0 < C; c0 += L) {
    const int64_t nc = std::min(L, C - c0);
    const float* xb = x + c0 * HW;  // block c0 / L
    for (int64_t p = p0; p < p1; ++p) {
      const float* src = xb + (sub.on() ? sub.src(p) : p) * L;
      int8_t* dst = q + p * C + c0;
      int64_t c = 0;
#if defined(__AVX2__)
      for (; c + 8 <= nc; c += 8) bad[p] |= uint8_t(quantize8(_mm256_loadu_ps(src + c), vinv, dst + c, signs));
#endif
      for (; c < nc; ++c) quantize1(src[c], inv, dst + c, neg, bad[p]);
    }
  }
#if defined(__AVX2__)
  neg |= (_mm_movemask_epi8(signs) & 0xff) != 0;
#endif
  return neg;
}

// act over n stored values, for the activations store_blocked's vectors leave out.
void finish_activation(Activation act, float* y, int64_t n) {
  with_activation(per_value(act), [&](auto f) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(y[i]);
  });
  per_row(act, y, n);
}

#if defined(__AVX2__)
// 8 values' codes as int32 lanes, code_of's, and INT_MIN where a value is NaN or infinite:
// v * inv + (v - v) is NaN exactly there (v - v is 0 for every finite v), the clamps keep a
// NaN (their value operand second) and vcvtps2dq turns it into INT_MIN, which the
// saturating packs below make -128.
inline __m256i code_lanes(__m256 v, __m256 vinv) {
  const __m256 t = _mm256_add_ps(_mm256_mul_ps(v, vinv), _mm256_sub_ps(v, v));
  return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_set1_ps(127.0f), _mm256_max_ps(_mm256_set1_ps(-127.0f), t)));
}
// 8 values' codes into dst.
inline void store_codes8(__m256 v, __m256 vinv, int8_t* dst) {
  const __m256i c = code_lanes(v, vinv);
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(w, w));
}
// 32 values' codes into dst in one store: the packs work within 128-bit lanes, leaving each
// vector's low and high 4 codes 16 bytes apart; one dword permute restores the order.
inline void store_codes32(const __m256 (&v)[4], __m256 vinv, int8_t* dst) {
  const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(code_lanes(v[0], vinv), code_lanes(v[1], vinv)),
                                       _mm256_packs_epi32(code_lanes(v[2], vinv), code_lanes(v[3], vinv)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}
#endif
// n values t into codes at dst on 1 / scale = inv: code_of's, -128 for a NaN or infinity.
void quantize_run(const float* t, int64_t n, float inv, int8_t* dst) {
  int64_t c = 0;
#if defined(__AVX2__)
  const __m256 vinv = _mm256_set1_ps(inv);
  for (; c + 8 <= n; c += 8) store_codes8(_mm256_loadu_ps(t + c), vinv, dst + c);
#endif
  for (; c < n; ++c) dst[c] = finite(t[c]) ? code_of(t[c], inv) : int8_t(-128);
}

// The epilogue of the blocked write-out: per channel of the blocked output (OCB * L) a
// scale and a shift (1 and 0 where the conv has none; 0 and 0 past OC), and the activation.
struct BlockedEpilogue {
  std::vector<float> scale, shift;
  Activation act = Activation::kNone;
};

// One image's tensors for the blocked write-out (null: absent): the residual as floats ri
// (blocked like yi) or as codes rq [cols, OC] on r_scale (-128: NaN), the output floats yi
// [OCB, cols, L] and codes yq [cols, OC] on 1 / scale = inv. The codes' pointers are at the
// write-out's first pixel, p0; ri and yi at the image's.
struct BlockedIo {
  const float* ri = nullptr;
  const int8_t* rq = nullptr;
  float r_scale = 0.0f;
  float* yi = nullptr;
  int8_t* yq = nullptr;
  float inv = 0.0f;
};

// A residual code's value: code * scale, NaN for the mark -128.
inline float residual_of(int8_t q, float scale) {
  return q == -128 ? std::numeric_limits<float>::quiet_NaN() : float(q) * scale;
}
// 8 of them.
inline v8f residual8(const int8_t* q, float scale) {
#if defined(__AVX2__)
  const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
  const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(scale));
  const __m256 mark = _mm256_castsi256_ps(_mm256_cmpeq_epi32(c, _mm256_set1_epi32(-128)));
  return v8f(_mm256_blendv_ps(v, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()), mark));
#else
  v8f v;
  for (int j = 0; j < 8; ++j) v[j] = residual_of(q[j], scale);
  return v;
#endif
}

// The codes of one pixel's channels [c0, c1) (at most a block, 16) value by value: a
// block cut by the write-out's range or by OC, in both codes-alone write-outs below.
template <Activation A>
void codes_by_value(const float* a, const int8_t* rr, float rs, const BlockedEpilogue& e, int64_t c0, int64_t c1,
                    float inv, int8_t* yy) {
  alignas(32) float tbuf[16];
  for (int64_t c = c0; c < c1; ++c) {
    float v = a[c] * e.scale[size_t(c)] + e.shift[size_t(c)];
    if (rr) v += residual_of(rr[c], rs);
    tbuf[c - c0] = simple_activation<A>(v);
  }
  quantize_run(tbuf, c1 - c0, inv, yy + c0);
}

#if defined(__x86_64__)
// The codes-alone write-out below (no floats out, no float residual) on AVX-512, a
// block of 16 channels a vector, for ReLU or no activation (A): quant::codes16, the
// arithmetic of code_lanes and residual8 on twice the lanes (and vpmovsdb's saturation
// where store_codes8 packs: INT_MIN, a NaN's conversion, to -128 both ways), so the same
// codes. The channels' scale and shift by one FMA, as the compiler contracts
// store_blocked's. A block cut by [n0, n1) or by OC goes value by value as there. On
// AVX-512 VNNI this write-out was 14% of ResNet-50 int8-static's samples at 8 lanes.
template <Activation A>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void codes_alone_avx512(
    const float* acc, int64_t OC, int64_t len, int64_t n0, int64_t n1, const BlockedEpilogue& e, const BlockedIo& io) {
  static_assert(A == Activation::kNone || A == Activation::kRelu);
  const __m512 vinv = _mm512_set1_ps(io.inv), rs = _mm512_set1_ps(io.r_scale);
  for (int64_t i = 0; i < len; ++i) {
    const float* a = acc + i * OC;
    const int8_t* rr = io.rq ? io.rq + i * OC : nullptr;
    int8_t* yy = io.yq + i * OC;
    for (int64_t b0 = n0 / 16 * 16; b0 < n1; b0 += 16) {
      const int64_t c0 = std::max(n0, b0), c1 = std::min(n1, b0 + 16);
      if (c0 == b0 && c1 == b0 + 16 && c1 <= OC) {
        const __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(a + b0), _mm512_loadu_ps(e.scale.data() + b0),
                                         _mm512_loadu_ps(e.shift.data() + b0));
        quant::codes16(v, rr ? rr + b0 : nullptr, rs, A == Activation::kRelu, vinv, yy + b0, __mmask16(0xFFFF));
        continue;
      }
      codes_by_value<A>(a, rr, io.r_scale, e, c0, c1, io.inv, yy);
    }
  }
}
#endif

// Rows [m, m + len) of acc (OC apart: pixels p0.. of one image, channels as columns),
// channels [n0, n1), into that image's blocked output io.yi [OCB, cols, L], with the
// epilogue and the image's residual (io.ri or io.rq; neither: none). Whole blocks of L channels as vectors of 8, the
// activation in registers where simple_activation has it, else over the stored run; a
// block cut by [n0, n1) or by OC value by value, its channels past OC written 0 by the
// call that reaches OC. With io.yq, each value's code too (quantize_run's), from the
// register where it can; io.yi null: the codes alone (with no float residual and the
// activation in registers, pixel by pixel over all of [n0, n1): conv2d_int8 then calls
// once per chunk of rows and run of columns).
template <Activation A>
void store_blocked(const float* acc, int64_t OC, int64_t L, int64_t cols, int64_t p0, int64_t len, int64_t n0,
                   int64_t n1, const BlockedEpilogue& e, const BlockedIo& io) {
  const Activation rest = A == e.act ? Activation::kNone : e.act;
  const float* ri = io.ri;
  const int8_t* rq = io.rq;
  float* yi = io.yi;
  int8_t* yq = io.yq;
  const float inv = io.inv, rs = io.r_scale;
#if defined(__AVX2__)
  const __m256 vinv = _mm256_set1_ps(inv);
  const bool codes_in_register = yq && rest == Activation::kNone;
#else
  const bool codes_in_register = false;
#endif
  alignas(32) float tbuf[16];  // yi null: one pixel's floats of a block
#if defined(__x86_64__)
  if constexpr (A == Activation::kNone || A == Activation::kRelu) {
    if (!yi && !ri && codes_in_register && L == 16 && gemm_detail::kernels_use_avx512()) {
      codes_alone_avx512<A>(acc, OC, len, n0, n1, e, io);
      return;
    }
  }
#endif
  if (!yi && !ri && codes_in_register) {
    // Codes alone, and no float residual: every stream is pixels x channels (the rows
    // of acc, the residual codes, the output codes), so the write-out goes pixel by
    // pixel, each read or written in one run. Block by block, a row of codes was
    // touched once per block, 8 or 16 bytes of it at a time: ResNet-50's 64 -> 256 conv
    // with a residual over 56 x 56 at batch 8 took 1.1x (AVX2) to 2x (AVX-512) the time,
    // its other 1x1 convs 1.03-1.17x (AMD Zen 5, 2 threads). The same vectors and
    // per-value tails as below, so the same codes.
    for (int64_t i = 0; i < len; ++i) {
      const float* a = acc + i * OC;
      const int8_t* rr = rq ? rq + i * OC : nullptr;
      int8_t* yy = yq + i * OC;
      for (int64_t b0 = n0 / L * L; b0 < n1; b0 += L) {
        const int64_t c0 = std::max(n0, b0), c1 = std::min(n1, b0 + L);
        if (c0 == b0 && c1 == b0 + L && c1 <= OC) {
          const auto value8 = [&](int64_t c) {
            v8f v = load8(a + c) * load8(e.scale.data() + c) + load8(e.shift.data() + c);
            if (rr) v += residual8(rr + c, rs);
            return simple_activation<A>(v);
          };
#if defined(__AVX2__)
          // Four whole blocks of 8 (two of 16) from here: their codes in one 32-byte store
          // rather than four 8-byte ones. ResNet-50 int8-static (AMD Zen 3, two paired
          // runs, the same codes): b1 0.986x and 0.985x the time, b8 0.959x and 0.980x.
          if (b0 + 32 <= std::min(n1, OC)) {
            const __m256 v[4] = {__m256(value8(b0)), __m256(value8(b0 + 8)), __m256(value8(b0 + 16)),
                                 __m256(value8(b0 + 24))};
            store_codes32(v, vinv, yy + b0);
            b0 += 32 - L;
            continue;
          }
#endif
          for (int64_t c = b0; c < c1; c += 8) {
#if defined(__AVX2__)
            store_codes8(__m256(value8(c)), vinv, yy + c);
#endif
          }
          continue;
        }
        codes_by_value<A>(a, rr, rs, e, c0, c1, inv, yy);
      }
    }
    return;
  }
  // Floats out or a float residual: block by block over all the pixels, so each block's
  // residual and floats are read and written in long runs; the codes, 8 bytes at a time
  // a row of OC apart, stay in L2. (In tiles of 16 pixels, the blocks inside, the
  // residual's runs were too short for the prefetchers: the conv took 1.4x the
  // float-only time, against 1.2x this way.)
  for (int64_t ob = n0 / L; ob * L < n1; ++ob) {
    const int64_t b0 = ob * L, c0 = std::max(n0, b0), c1 = std::min(n1, b0 + L);
    const float *sc = e.scale.data() + b0, *sh = e.shift.data() + b0;
    const int64_t at = (ob * cols + p0) * L;  // pixel p0 of block ob
    float* y = yi ? yi + at : nullptr;
    const float* res = ri ? ri + at : nullptr;
    if (c0 == b0 && c1 == b0 + L && c1 <= OC) {
      for (int64_t i = 0; i < len; ++i) {
        for (int64_t j = 0; j < L; j += 8) {
          v8f v = load8(acc + i * OC + b0 + j) * load8(sc + j) + load8(sh + j);
          if (res) v += load8(res + i * L + j);
          if (rq) v += residual8(rq + i * OC + b0 + j, rs);
          v = simple_activation<A>(v);
          if (y) store8(y + i * L + j, v);
#if defined(__AVX2__)
          if (codes_in_register) {
            store_codes8(__m256(v), vinv, yq + i * OC + b0 + j);
            continue;
          }
#endif
          if (!y) store8(tbuf + j, v);
        }
        if (!y && !codes_in_register) {  // codes alone, through tbuf
          if (rest != Activation::kNone) finish_activation(rest, tbuf, L);
          quantize_run(tbuf, L, inv, yq + i * OC + b0);
        }
      }
      if (y && rest != Activation::kNone) finish_activation(rest, y, len * L);
      if (y && yq && !codes_in_register)
        for (int64_t i = 0; i < len; ++i) quantize_run(y + i * L, L, inv, yq + i * OC + b0);
      continue;
    }
    for (int64_t i = 0; i < len; ++i) {
      float* yp = y ? y + i * L : tbuf;
      for (int64_t c = c0; c < c1; ++c) {
        float v = acc[i * OC + c] * sc[c - b0] + sh[c - b0];
        if (res) v += res[i * L + c - b0];
        if (rq) v += residual_of(rq[i * OC + c], rs);
        yp[c - b0] = simple_activation<A>(v);
      }
      if (rest != Activation::kNone) finish_activation(rest, yp + c0 - b0, c1 - c0);
      if (yq) quantize_run(yp + c0 - b0, c1 - c0, inv, yq + i * OC + c0);
      if (c1 == OC) std::fill(yp + OC - b0, yp + L, 0.0f);
    }
  }
}

void store_blocked(const float* acc, int64_t OC, int64_t L, int64_t cols, int64_t p0, int64_t len, int64_t n0,
                   int64_t n1, const BlockedEpilogue& e, const BlockedIo& io) {
  auto store = [&](auto a) { store_blocked<decltype(a)::value>(acc, OC, L, cols, p0, len, n0, n1, e, io); };
  if (!with_simple_activation(e.act, store)) store(std::integral_constant<Activation, Activation::kNone>{});
}

// One row of C codes: whether any is the mark -128, whether any is negative, their sum.
struct RowScan {
  bool mark = false, neg = false;
  int32_t sum = 0;
};
RowScan scan_row(const int8_t* row, int64_t C) {
  RowScan r;
  int64_t c = 0;
#if defined(__AVX2__)
  if (C >= 32) {  // (a shorter row, a stem's 3 channels: the scalar loop alone, no reductions)
    // the sum: sad(code ^ 0x80, 0) over each 8 bytes is their sum + 8 x 128
    __m256i m = _mm256_set1_epi8(127), acc = _mm256_setzero_si256();
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (; c + 32 <= C; c += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c));
      m = _mm256_min_epi8(m, v);
      acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_xor_si256(v, flip), _mm256_setzero_si256()));
    }
    const __m128i h = _mm_min_epi8(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    r.mark = _mm_movemask_epi8(_mm_cmpeq_epi8(h, _mm_set1_epi8(-128))) != 0;
    r.neg = _mm_movemask_epi8(h) != 0;
    const __m128i a2 = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    r.sum = int32_t(_mm_cvtsi128_si64(_mm_add_epi64(a2, _mm_unpackhi_epi64(a2, a2))) - 128 * c);
  }
#endif
  for (; c < C; ++c) {
    r.mark |= row[c] == -128;
    r.neg |= row[c] < 0;
    r.sum += row[c];
  }
  return r;
}

// Pixels [p0, p1) of codes q [*, C] (pixel-major; conv2d_int8's input codes): bad[p] = 1
// where pixel p holds the mark of a NaN or infinity (-128), sum[p] the sum of its codes;
// returns whether any code is negative. With sub, pixel p is read from the input's pixel
// sub.src(p) of src and copied into q first.
bool scan_codes(const int8_t* src, int64_t C, int64_t p0, int64_t p1, int8_t* q, uint8_t* bad, int32_t* sum,
                const Subsample& sub) {
  bool neg = false;
  for (int64_t p = p0; p < p1; ++p) {
    const int8_t* row = src + (sub.on() ? sub.src(p) : p) * C;
    if (sub.on()) {
      std::memcpy(q + p * C, row, size_t(C));
      row = q + p * C;
    }
    const RowScan r = scan_row(row, C);
    bad[p] = uint8_t(r.mark);
    neg |= r.neg;
    sum[p] = r.sum;
  }
  return neg;
}

// The scale of one image: the given one, or max |finite x| / 127 (1 for an image of
// zeros: every code is 0 either way). Threads split the image.
float image_scale(const float* x, int64_t n, std::optional<float> given) {
  if (given) return *given;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(64, n / 16384));
  std::vector<float> part(static_cast<size_t>(parts), 0.0f);
  parallel_for(parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      float amax = 0.0f;
      for (int64_t i = n * j / parts; i < n * (j + 1) / parts; ++i) {
        const float a = std::fabs(x[i]);
        amax = a <= std::numeric_limits<float>::max() && a > amax ? a : amax;
      }
      part[size_t(j)] = amax;
    }
  });
  const float amax = *std::max_element(part.begin(), part.end());
  return amax > 0.0f ? amax / 127.0f : 1.0f;
}

// out[j] = the sum of codes [16 j, 16 j + 16) for j < n.
void sums16(const int8_t* q, int64_t n, int16_t* out) {
  int64_t j = 0;
#if defined(__AVX2__)
  // |sad(code ^ 0x80, 0)| over 8 bytes = their sum + 8 x 128: two of those per 16.
  const __m256i flip = _mm256_set1_epi8(char(0x80)), zero = _mm256_setzero_si256();
  for (; j + 2 <= n; j += 2) {
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16 * j)), flip);
    const __m256i sad = _mm256_sad_epu8(v, zero);
    const __m256i t = _mm256_add_epi64(sad, _mm256_srli_si256(sad, 8));
    out[j] = int16_t(_mm256_extract_epi64(t, 0) - 2048);
    out[j + 1] = int16_t(_mm256_extract_epi64(t, 2) - 2048);
  }
#endif
  for (; j < n; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += q[16 * j + i];
    out[j] = int16_t(sum);
  }
}

std::atomic<int64_t> direct_calls{0};

}  // namespace

int64_t conv2d_int8_direct_calls() { return direct_calls.load(std::memory_order_relaxed); }

PackedOperand conv2d_int8_pack(const Conv2dInt8Geom& g, const uint8_t* w, QIsa isa) {
  std::vector<uint8_t> rows = reorder_filters(g, w);
  if (isa != QIsa::kScalar) return qmatmul_pack_int8(rows.data(), g.OC, g.K(), isa);
  // The scalar reference reads the reordered rows as they are.
  PackedOperand o;
  o.side = PackedOperand::kQ8;
  o.isa = uint8_t(isa);
  o.rows = g.OC;
  o.cols = g.K();
  o.data.reset(static_cast<float*>(std::aligned_alloc(64, (rows.size() + 63) / 64 * 64)), std::free);
  ZENITH_CHECK(o.data, "conv2d: out of memory packing an int8 filter of ", g.OC, " x ", g.K());
  std::memcpy(o.data.get(), rows.data(), rows.size());
  return o;
}

void conv2d_int8(const Conv2dInt8Geom& g, QIsa isa, const float* x, const PackedOperand& w,
                 std::optional<float> x_scale, const GemmEpilogue& ep, const float* residual, float* y,
                 const Conv2dInt8Codes& io) {
  const int64_t N = g.N, C = g.C, HW = g.H * g.W, OC = g.OC, cols = g.OH * g.OW, K = g.K(), L = g.L;
  const int64_t M = N * cols;
  ZENITH_CHECK(L == 0 || L == 8 || L == 16, "conv2d: the int8 conv's channel block ", L, " is not 0 (NCHW), 8 or 16");
  ZENITH_CHECK(C > 0 && K > 0, "conv2d: an int8 conv needs input channels and a kernel, got ", C, " channels and ",
               g.KH, "x", g.KW);
  ZENITH_CHECK(!ep.col_shift, "conv2d: an int8 conv's epilogue is per output channel");
  ZENITH_CHECK((!io.x && !io.y && !io.res) || L, "conv2d: an int8 conv reads or writes codes over the blocked layout "
               "only");
  ZENITH_CHECK(!io.res || (!residual && usable_scale(io.res_scale)),
               "conv2d: a residual as codes needs a positive finite scale, and no float residual beside it");
  ZENITH_CHECK(!io.x || x_scale, "conv2d: an int8 conv reading codes needs their scale");
  ZENITH_CHECK(!io.y || usable_scale(io.y_scale), "conv2d: the output codes' scale must be a positive finite number with "
               "a finite inverse, got ", io.y_scale);
  // Floats per image of x and of y (and the residual): blocked, whole blocks of channels.
  const int64_t XL = g.x_nchw ? 0 : L;  // x's layout
  ZENITH_CHECK(!g.x_nchw || (L && !io.x), "conv2d: an int8 conv over an NCHW x with a blocked y reads floats");
  const int64_t x_image = (XL ? (C + L - 1) / L * L : C) * HW, y_image = (L ? (OC + L - 1) / L * L : OC) * cols;
  if (M == 0 || OC == 0) return;
  ZENITH_CHECK(y || io.y, "conv2d: an int8 conv needs an output, floats or codes");
  ZENITH_CHECK(w.side == PackedOperand::kQ8 && w.isa == uint8_t(isa) && w.rows == OC && w.cols == K,
               "conv2d: the packed int8 filter is not this conv's, for this ISA");
  ZENITH_CHECK(!x_scale || usable_scale(*x_scale), "conv2d: the activation scale must be a positive finite number with a "
               "finite inverse, got ", x_scale ? *x_scale : 0.0f);
  const QMatmulPlan plan0 = qmatmul_plan(QFormat::int8, 1, OC, K, isa);
  // A 1x1 stride-1 conv over channels in whole 32s reads its rows in place: row m is
  // pixel m's codes. With a stride (ResNet's downsampling convs) only the pixels it reads
  // are quantized, and then read in place. Other convs build each output pixel's window row.
  const bool in_place = g.KH == 1 && g.KW == 1 && g.pd[0] == 0 && g.pd[1] == 0 && K == plan0.kpad;
  const bool strided = in_place && (g.st[0] != 1 || g.st[1] != 1);
  Subsample sub;
  if (strided) sub = Subsample{g.OW, g.st[0], g.st[1], g.W};
  const int64_t QP = strided ? cols : HW;  // pixels quantized per image
  // Window rows whose tap rows are runs of at most 32 codes (a stem: 7 pixels of 3
  // channels) from this call's own codes (whose buffer has room to read past them) are
  // copied 32 bytes a tap row, and their sums of codes summed from the built row, not from
  // each pixel's (none are made then). The per-tap copies and per-pixel sums had been most
  // of an int8 7x7 stem's time (perf): ResNet-50's, 3 -> 64 over 224 x 224, now takes 0.78x
  // the time at batch 1 and 0.86x at batch 8, the same outputs (AMD Zen 4, family 25 model
  // 17, AVX-512 VNNI, 2 threads, calls interleaved in one process).
  const bool short_runs = !in_place && !io.x && g.dl[1] == 1 && g.KW * C <= 32;
  // Direct rows (AVX-512 VNNI's uniform tiles): a conv over channels in whole 32s with
  // dilation 1 reads each output pixel's window in place from a zero-padded copy of its
  // input codes, one run of KW * C codes per kernel row (QActRow::nseg), instead of
  // building window rows (KH * KW copies of each input pixel: ResNet-50 int8-static's
  // window rows and their copies were 7% of its samples at batch 1, AMD Zen 4).
  // ZENITH_INT8_DIRECT=0 builds window rows instead (read per call: tests and A/Bs).
  const char* direct_env = std::getenv("ZENITH_INT8_DIRECT");
  const bool direct = !in_place && !short_runs && L && isa == QIsa::kAvx512 && g.dl[0] == 1 && g.dl[1] == 1 &&
                      C % 32 == 0 && K == plan0.kpad && K <= 65536 && plan0.uniform_tiles &&
                      !(direct_env && direct_env[0] == '0' && !direct_env[1]);
  if (direct) direct_calls.fetch_add(1, std::memory_order_relaxed);
  // Every image quantized: codes [N * QP, C] (pixels x channels), then a bad-pixel flag
  // per pixel, with one scale per image; tiles of pixels (up to 256, about 64 KiB of
  // floats) of every image split across threads (with tiles of 256 per image in turn, a
  // 14 x 14 map had been one tile: one thread).
  // Codes given as x (io.x) are read in place, unless strided: then the pixels read are copied.
  const bool own_codes = !io.x || strided;
  // Each pixel's sum of codes too (the zero point's share of the VNNI tiles' uniform rows:
  // a row's sum is its taps' pixels' sums): with codes in, in the scan that flags it; with
  // floats in, over each tile's codes just after the quantizer wrote them (not for
  // short_runs' convs, whose rows are summed as built).
  thread_local AlignedBuf img_buf;
  const int64_t code_floats = (N * QP * ((own_codes ? C : 0) + 1) + 3) / 4;
  // (+ 8 floats: a short window run is copied as 32 bytes, reading up to 31 past the codes)
  float* ibase = img_buf.get(size_t(code_floats + N * QP + 8));
  int8_t* qbuf = reinterpret_cast<int8_t*>(ibase);
  const int8_t* codes = own_codes ? qbuf : io.x;
  uint8_t* bad = reinterpret_cast<uint8_t*>(qbuf + (own_codes ? N * QP * C : 0));
  int32_t* psum = reinterpret_cast<int32_t*>(ibase + code_floats);
  std::vector<float> scale(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) scale[size_t(n)] = io.x ? *x_scale : image_scale(x + n * x_image, x_image, x_scale);
  const int64_t kTile =
      std::max<int64_t>(8, std::min<int64_t>(256, (int64_t(64) << 10) / std::max<int64_t>(C, 1)) / 8 * 8);
  const int64_t tiles = (QP + kTile - 1) / kTile;
  std::vector<uint8_t> neg(static_cast<size_t>(N * tiles), 0);
  parallel_for(N * tiles, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / tiles, p0 = t % tiles * kTile;
      const int64_t p1 = std::min(QP, p0 + kTile);
      const float inv = 1.0f / scale[size_t(n)];
      if (io.x) {
        neg[size_t(t)] =
            scan_codes(io.x + n * HW * C, C, p0, p1, strided ? qbuf + n * QP * C : nullptr, bad + n * QP, psum + n * QP,
                       sub);
        continue;
      }
      int8_t* q = qbuf + n * QP * C;
      neg[size_t(t)] = XL ? quantize_pixels_blocked(x + n * x_image, C, L, HW, p0, p1, inv, q, bad + n * QP, sub)
                         : quantize_pixels(x + n * x_image, C, HW, p0, p1, inv, q, bad + n * QP, sub);
      if (!short_runs)
        for (int64_t p = p0; p < p1; ++p) psum[n * QP + p] = scan_row(q + p * C, C).sum;
    }
  });
  // An input with no negative code (after a ReLU: most convs of a CNN) lets AVX2's tiles
  // skip the sign trick; the window rows add only zeros.
  const bool nonneg = plan0.uniform_nonneg_tiles && std::find(neg.begin(), neg.end(), uint8_t(1)) == neg.end();
  // Direct rows: each image's codes with a border of zero codes (ph rows, pw columns).
  const int64_t Hp = g.H + 2 * g.pd[0], Wp = g.W + 2 * g.pd[1], pad_image = Hp * Wp * C;
  thread_local AlignedBuf pad_buf;
  int8_t* padded = direct ? reinterpret_cast<int8_t*>(pad_buf.get(size_t((N * pad_image + 3) / 4))) : nullptr;
  if (direct)
    parallel_for(N * Hp, 8, [&](int64_t lo, int64_t hi) {
      const int64_t H = g.H, W = g.W, pw = g.pd[1];
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t n = t / Hp, ih = t % Hp - g.pd[0];
        int8_t* dst = padded + n * pad_image + t % Hp * Wp * C;
        if (ih < 0 || ih >= H) {
          std::memset(dst, 0, size_t(Wp * C));
          continue;
        }
        std::memset(dst, 0, size_t(pw * C));
        std::memcpy(dst + pw * C, codes + (n * QP + ih * W) * C, size_t(W * C));
        std::memset(dst + (pw + W) * C, 0, size_t(pw * C));
      }
    });
  // Images with a NaN or infinity (short_runs' rows look up the flags only there).
  std::vector<uint8_t> image_bad(static_cast<size_t>(short_runs ? N : 0));
  for (int64_t n = 0; n < int64_t(image_bad.size()); ++n)
    image_bad[size_t(n)] = std::memchr(bad + n * QP, 1, size_t(QP)) != nullptr;
  const int64_t kpad = plan0.kpad, nscales = plan0.nscales, nsums = plan0.nsums;
  // Rows in chunks of at most 1 MiB of codes and 512 KiB of int8 GEMM results (they stay
  // in L2 until written out); each chunk's window rows built, multiplied, and its
  // output blocks written into NCHW (or the blocked layout). A filter of at most 512 KiB (every conv of ResNet-50
  // but the 3x3s over 256+ channels and the 1x1s to or from 2048) stays in each core's
  // L2: with 2+ threads and 64+ rows each, every thread then takes an equal share of the
  // rows and runs it chunk by chunk, building, multiplying and storing without waiting
  // for the others (12% of a 64-channel 3x3's time over 56 x 56 had been the fork and
  // join around each chunk's two steps, and its 64 columns were 2 blocks of 32 to split).
  // Otherwise one chunk at a time: threads build its rows, then split its blocks of columns.
  const int threads = num_threads();
  const bool by_rows = threads > 1 && OC * kpad <= (int64_t(512) << 10) && M >= 64 * threads;
  const int64_t chunk =
      std::min(M, std::max<int64_t>(64, std::min((int64_t(1) << 20) / kpad, (int64_t(512) << 10) / (4 * OC))));
  // Rows a thread's buffers hold: by rows, a piece is rounded up to whole tiles, so up to
  // the chunk rounded up (MobileNet V2 at batch 8 overran 341-row buffers by 3 rows).
  const int64_t tile = std::max(1, plan0.uniform_rows);
  const int64_t cap = by_rows ? (chunk + tile - 1) / tile * tile : chunk;
  // (direct: a row pointer, 2 floats' room, where the window row would be)
  const int64_t row_head = in_place ? 0 : direct ? 2 : kpad / 4;
  const int64_t row_floats = cap * (row_head + nscales + (nsums + 1) / 2 + 1);
  // The SIMD tiles sum each row over all of K on its image's one scale (q8_gemm_packed's
  // uniform rows, up to K of 65536): they read the row's first scale and its sum of codes
  // (QActRows::totals), no 16-sums. The scalar reference reads a scale and two 16-sums per
  // 32 codes.
  const bool row_totals = isa != QIsa::kScalar && kpad <= 65536;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float y_inv = io.y ? 1.0f / io.y_scale : 0.0f;
  const bool codes_only = L && io.y && !y && !residual;
  // Codes alone under ReLU or no activation, on rows the uniform tiles sum over all of K,
  // where the plan has tiles that write codes (AVX-512 VNNI): each tile's floats go
  // through the epilogue straight to codes (quant::QCodesOut), with no L2 buffer of floats
  // in between and no second pass over it (store_blocked).
  const bool fused_codes =
      codes_only && row_totals && plan0.codes_tiles && (ep.act == Activation::kNone || ep.act == Activation::kRelu);
  BlockedEpilogue be;  // the blocked write-out's epilogue
  if (L) {
    nchwc_detail::channel_scale_shift(ep.row_scale, ep.row_shift, OC, y_image / cols, be.scale, be.shift);
    be.act = ep.act;
  }
  // Chunk rows [lo, hi) from pixel c0 on: window rows into q (unless read in place), their
  // scales and sums of codes (tot; or 16-sums).
  auto build = [&](int64_t c0, int64_t lo, int64_t hi, int8_t* q, float* d, int16_t* s16, int32_t* tot,
                   const int8_t** ptrs) {
    // Locals: the int8 stores below may alias anything, so fields read through a
    // reference would be reloaded on every tap.
    const int64_t H = g.H, W = g.W, KH = g.KH, KW = g.KW, OW = g.OW, sh = g.st[0], sw = g.st[1], ph = g.pd[0],
                  pw = g.pd[1], dh = g.dl[0], dw = g.dl[1], Cl = C, Kl = K, kp = kpad, ns = nsums;
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t m = c0 + r, n = m / cols, pix = m % cols, oh = pix / OW, ow = pix % OW;
      const int8_t* img = codes + n * QP * Cl;
      const uint8_t* flags = bad + n * QP;
      const int32_t* sums = psum + n * QP;
      const int8_t* row = codes + m * Cl;
      bool nonfinite = false;
      int32_t total = 0;
      if (in_place) {  // (flags and sums are the input's pixels': a padded conv has more outputs)
        nonfinite = flags[pix];
        total = sums[pix];
      } else if (direct) {  // the window in place: its flags and sums from the taps inside the image
        const int64_t ih0 = oh * sh - ph, iw0 = ow * sw - pw;
        for (int64_t ih = std::max<int64_t>(ih0, 0); ih < std::min(ih0 + KH, H); ++ih)
          for (int64_t iw = std::max<int64_t>(iw0, 0); iw < std::min(iw0 + KW, W); ++iw) {
            nonfinite |= flags[ih * W + iw] != 0;
            total += sums[ih * W + iw];
          }
        ptrs[r] = padded + n * pad_image + (oh * sh * Wp + ow * sw) * Cl;
      } else {
        int8_t* dst = q + r * kp;
        row = dst;
        // Kernel columns [kw0, kw1) fall inside the image; with dilation 1 their codes
        // are one run of the image row (pixels x channels), copied at once.
        const int64_t iw0 = ow * sw - pw;
        const int64_t kw0 = iw0 >= 0 ? 0 : std::min(KW, (-iw0 + dw - 1) / dw);
        const int64_t kw1 = std::max(kw0, std::min(KW, W - iw0 > 0 ? (W - iw0 + dw - 1) / dw : 0));
        for (int64_t kh = 0; kh < KH; ++kh, dst += KW * Cl) {
          const int64_t ih = oh * sh - ph + kh * dh;
          if (ih < 0 || ih >= H || kw1 == kw0) {
            std::memset(dst, 0, size_t(KW * Cl));
            continue;
          }
          if (kw0) std::memset(dst, 0, size_t(kw0 * Cl));
          const int64_t base = ih * W + iw0;
          if (short_runs && (dst - (q + r * kp)) + kw0 * Cl + 32 <= kp) {
            // 32 bytes from the run's first: past the run, the next tap row's codes, the
            // zeros below or the row's padding past K overwrite them.
            std::memcpy(dst + kw0 * Cl, img + (base + kw0) * Cl, 32);
            if (kw1 < KW) std::memset(dst + kw1 * Cl, 0, size_t((KW - kw1) * Cl));
          } else if (dw == 1) {
            std::memset(dst + kw1 * Cl, 0, size_t((KW - kw1) * Cl));
            std::memcpy(dst + kw0 * Cl, img + (base + kw0) * Cl, size_t((kw1 - kw0) * Cl));
          } else {
            std::memset(dst + kw1 * Cl, 0, size_t((KW - kw1) * Cl));
            for (int64_t kw = kw0; kw < kw1; ++kw)
              std::memcpy(dst + kw * Cl, img + (base + kw * dw) * Cl, size_t(Cl));
          }
          if (!short_runs)
            for (int64_t kw = kw0; kw < kw1; ++kw) {
              nonfinite |= flags[base + kw * dw] != 0;
              total += sums[base + kw * dw];
            }
          else if (image_bad[size_t(n)])
            for (int64_t kw = kw0; kw < kw1; ++kw) nonfinite |= flags[base + kw] != 0;
        }
        std::memset(dst, 0, size_t(kp - Kl));
        if (short_runs) total = scan_row(row, kp).sum;  // the row's codes (zeros past K)
      }
      if (row_totals) {
        tot[r] = total;
        d[r * nscales] = nonfinite ? nan : scale[size_t(n)];
        continue;
      }
      sums16(row, ns, s16 + r * ns);
      std::fill_n(d + r * nscales, nscales, nonfinite ? nan : scale[size_t(n)]);
    }
  };
  // The chunk of cn rows from pixel c0, built: its GEMM into acc [cn, OC] and each block
  // of it stored (threaded over blocks of columns unless called from a thread's task).
  auto multiply = [&](int64_t c0, int64_t cn, const int8_t* q, const float* d, const int16_t* s16,
                      const int32_t* tot, const int8_t* const* ptrs, float* acc) {
    // uniform: one scale per image, so the GEMM sums over all of K.
    QActRows rows{in_place ? codes + c0 * C : q, d, s16, nullptr, nullptr, kpad, nscales, nsums, K, true};
    if (direct) {  // KH runs of KW * C codes, a padded image row apart
      rows.ptrs = ptrs;
      rows.nseg = int32_t(g.KH);
      rows.seg_stride = Wp * C;
    }
    rows.nonneg = nonneg;
    if (row_totals) rows.totals = tot;
    // Rows [m0, m1) of the chunk, columns [n0, n1): into NCHW (or blocked), image by
    // image, with the epilogue of those channels and pixels.
    auto store = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      for (int64_t m = m0; m < m1;) {
        const int64_t gm = c0 + m, n = gm / cols, p0 = gm % cols, len = std::min(m1 - m, cols - p0);
        if (L) {  // floats, codes or both
          BlockedIo b;
          b.ri = residual ? residual + n * y_image : nullptr;
          b.rq = io.res ? io.res + (n * cols + p0) * OC : nullptr;
          b.r_scale = io.res_scale;
          b.yi = y ? y + n * y_image : nullptr;
          b.yq = io.y ? io.y + (n * cols + p0) * OC : nullptr;
          b.inv = y_inv;
          store_blocked(acc + m * OC, OC, L, cols, p0, len, n0, n1, be, b);
          m += len;
          continue;
        }
        float* dst = y + (n * OC + n0) * cols + p0;
        transpose_block(acc + m * OC + n0, OC, dst, cols, len, n1 - n0);
        GemmEpilogue e = ep;
        if (residual) {
          e.residual = residual + n * OC * cols;
          e.ld_residual = cols;
        }
        if (!e.empty()) sgemm_epilogue_block(e, dst, cols, n0, p0, n1 - n0, len);
        m += len;
      }
    };
    // codes8: the image quantizer's codes (never the AVX2 narrow tiles' 7-bit ones)
    const QMatmulPlan plan = qmatmul_plan(QFormat::int8, cn, OC, K, isa, 0.0f, true);
    if (isa != QIsa::kScalar) {
      if (fused_codes) {  // the tiles write the codes
        quant::QCodesOut o;
        o.scale = be.scale.data();
        o.shift = be.shift.data();
        o.res = io.res ? io.res + c0 * OC : nullptr;
        o.r_scale = io.res_scale;
        o.y = io.y + c0 * OC;
        o.ld = OC;
        o.inv = y_inv;
        o.relu = ep.act == Activation::kRelu;
        q8_gemm_packed(plan, rows, w, nullptr, {}, {}, nullptr, &o);
        return;
      }
      // Codes alone go out row chunk by row chunk, all the columns at once (store_blocked's
      // pixel-by-pixel write-out); floats block of columns by block.
      if (codes_only) q8_gemm_packed(plan, rows, w, acc, {}, store);
      else q8_gemm_packed(plan, rows, w, acc, store);
      return;
    }
    const uint8_t* wr = reinterpret_cast<const uint8_t*>(w.data.get());
    parallel_for(OC, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t oc = lo; oc < hi; ++oc)
        for (int64_t r = 0; r < cn; ++r) acc[r * OC + oc] = quant::ref_dot(QFormat::int8, wr + oc * (4 + K), K, rows.row(r));
      store(0, cn, lo, hi);
    });
  };
  // A thread's buffers for one chunk: window rows (unless in place), scales, 16-sums, sums, results.
  struct ChunkBufs {
    int8_t* q;
    float* d;
    int16_t* s16;
    int32_t* tot;
    const int8_t** ptrs;
    float* acc;
  };
  thread_local AlignedBuf row_buf, out_buf;
  auto bufs = [&] {
    float* rbase = row_buf.get(size_t(row_floats));
    ChunkBufs b;
    b.q = in_place || direct ? nullptr : reinterpret_cast<int8_t*>(rbase);
    b.ptrs = direct ? reinterpret_cast<const int8_t**>(rbase) : nullptr;
    b.d = rbase + cap * row_head;
    b.s16 = reinterpret_cast<int16_t*>(b.d + cap * nscales);
    b.tot = reinterpret_cast<int32_t*>(b.d + cap * (nscales + (nsums + 1) / 2));
    b.acc = fused_codes ? nullptr : out_buf.get(size_t(cap * OC));  // (the tiles write the codes themselves)
    return b;
  };
  if (by_rows) {
    // Thread t takes rows [M t / T, M (t + 1) / T) (equal shares, cut at whole tiles) in
    // 2 or more equal chunks (whole tiles but the last): one chunk per share ran up to
    // 1.12x slower (a 64-channel 3x3 over 56 x 56 at b1: 1568 rows, 1.3 MiB of rows and
    // results in L2). (A piece of ceil(share / pieces) rows is at most the chunk; whole
    // tiles, at most cap.)
    auto share = [&](int64_t t) { return t == threads ? M : M * t / threads / tile * tile; };
    parallel_for(threads, 1, [&](int64_t lo, int64_t hi) {
      const ChunkBufs b = bufs();
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t r0 = share(t), r1 = share(t + 1), pieces = std::max<int64_t>(2, (r1 - r0 + chunk - 1) / chunk);
        const int64_t step = ((r1 - r0 + pieces - 1) / pieces + tile - 1) / tile * tile;
        ZENITH_CHECK(step <= cap, "conv2d: an int8 conv's piece of ", step, " rows overruns its ", cap, "-row buffers");
        for (int64_t c0 = r0; c0 < r1; c0 += step) {
          const int64_t cn = std::min(step, r1 - c0);
          build(c0, 0, cn, b.q, b.d, b.s16, b.tot, b.ptrs);
          multiply(c0, cn, b.q, b.d, b.s16, b.tot, b.ptrs, b.acc);  // inside a task: q8_gemm_packed runs on this thread
        }
      }
      row_buf.trim(size_t(16) << 20);
      out_buf.trim(size_t(16) << 20);
    });
  } else {
    const ChunkBufs b = bufs();
    for (int64_t c0 = 0; c0 < M; c0 += chunk) {
      const int64_t cn = std::min(chunk, M - c0);
      parallel_for(cn, 16, [&](int64_t lo, int64_t hi) { build(c0, lo, hi, b.q, b.d, b.s16, b.tot, b.ptrs); });
      multiply(c0, cn, b.q, b.d, b.s16, b.tot, b.ptrs, b.acc);
    }
  }
  img_buf.trim(size_t(16) << 20);
  pad_buf.trim(size_t(16) << 20);
  row_buf.trim(size_t(16) << 20);
  out_buf.trim(size_t(16) << 20);
}

}  // namespace zenith
