// The epilogue that writes an int8 conv's output as the next conv's codes, 16 channels
// (one AVX-512 vector) at a time: shared by conv2d_int8's codes-alone write-out (a pass
// over the GEMM's floats) and the VNNI tiles that write codes themselves
// (quant_avx512.cc, quant::QCodesOut), so both give the same codes bit for bit.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <limits>

namespace zenith::quant {

// GCC 12's AVX-512 intrinsics start from an _mm512_undefined_* value, which
// -Wmaybe-uninitialized reports (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// v (the channels' scaled and shifted sums), plus the residual's codes rr on scale rs (null:
// none; the mark -128 adds NaN), through ReLU if relu (x < 0 gives +0; NaN and -0 stay),
// as codes on 1 / scale = vinv into dst, lanes m: code_of's rounding (vcvtps2dq, half to
// even) and clamp to +-127, and -128 for a NaN or infinity (v x inv + (v - v) is NaN exactly
// there, the clamps keep it (value second), its conversion INT_MIN saturates to -128), as
// conv2d_int8's AVX2 packs do.
// (always_inline, and AVX512F/BW/VL only, a subset of both callers' targets: out of line, a
// call per 16 values.)
__attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) inline void codes16(
    __m512 v, const int8_t* rr, __m512 rs, bool relu, __m512 vinv, int8_t* dst, __mmask16 m) {
  if (rr) {
    const __m512i c = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, rr));
    const __mmask16 mark = _mm512_cmpeq_epi32_mask(c, _mm512_set1_epi32(-128));
    v = _mm512_add_ps(v, _mm512_mask_blend_ps(mark, _mm512_mul_ps(_mm512_cvtepi32_ps(c), rs),
                                              _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN())));
  }
  if (relu) v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, _mm512_setzero_ps());
  const __m512 t = _mm512_add_ps(_mm512_mul_ps(v, vinv), _mm512_sub_ps(v, v));
  const __m512 q = _mm512_min_ps(_mm512_set1_ps(127.0f), _mm512_max_ps(_mm512_set1_ps(-127.0f), t));
  _mm512_mask_cvtsepi32_storeu_epi8(dst, m, _mm512_cvtps_epi32(q));
}
#pragma GCC diagnostic pop

}  // namespace zenith::quant
#endif
