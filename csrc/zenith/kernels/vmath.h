// Branch-free float math that compilers vectorize inside plain loops, with the
// libm functions as scalar references (tests/cpp/test_kernels.cc holds each to a
// stated error bound against them).
//   vexp:  range reduction to [-ln2/2, ln2/2] and a degree-6 polynomial; < 2 ulp.
//   vexp_nonpos: vexp restricted to x <= 0 (softmax, and erf's small positive
//          exponents), cheaper; same error.
//   verf:  erfc via the Chebyshev fit of Numerical Recipes (erfc_poly; fractional
//          error < 1.2e-7 in exact arithmetic), reflected for negative inputs; absolute
//          error < 5e-7 in float. (GELU uses the same erfc directly: activation.h.)
//   vtanh, vsigmoid: built on vexp, with the small-|x| tanh done by a polynomial so
//          that relative error stays small near zero.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace zenith {

// exp's range reduction for xc already clamped to the float range: returns r with
// xc = n ln2 + r, |r| <= ln2/2, and n through *n; exp_reduced adds the polynomial,
// p ~ exp(r).
inline float exp_reduce(float xc, float* n) {
  const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  *n = std::floor(xc * log2e + 0.5f);
  return xc - *n * ln2_hi - *n * ln2_lo;
}
inline float exp_reduced(float xc, float* n) {
  const float r = exp_reduce(xc, n);
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

// The same with a degree-5 polynomial, 1 + r + r^2 q(r) (q fitted for relative error
// over |r| <= ln2/2: 1.05e-7 exact, 1.7e-7 in float): two FMAs fewer, for GELU, whose
// error budget (1e-6) has room for it.
inline float exp_reduced5(float xc, float* n) {
  const float r = exp_reduce(xc, n);
  float q = 8.312533609569073e-3f;
  q = q * r + 4.189012572169304e-2f;
  q = q * r + 1.6667114198207855e-1f;
  q = q * r + 4.99992311000824e-1f;
  return q * r * r + r + 1.0f;
}

// 2^n for -126 <= n <= 127, from its bits ((n + 127) << 23); n = -127 gives +0.
inline float pow2i(int32_t n) {
  const int32_t bits = (n + 127) << 23;
  float s;
  std::memcpy(&s, &bits, 4);
  return s;
}

inline float vexp(float x) {
  // Clamped so that NaN becomes a finite xc as well (max then min; NaN's result is replaced
  // below): converting a NaN n to int is undefined, and gave a negative value to shift.
  float xc = x > -87.3365478515625f ? x : -87.3365478515625f;
  xc = xc < 88.72283905206835f ? xc : 88.72283905206835f;
  float n;
  float p = exp_reduced(xc, &n);
  // 2^n as two factors so that n = +-127/128 at the ends of the range stays representable.
  int32_t n1 = int32_t(n) / 2, n2 = int32_t(n) - n1;
  float y = p * pow2i(n1) * pow2i(n2);
  y = x < -87.3365478515625f ? 0.0f : y;             // underflow (and -inf) -> 0
  y = x > 88.72283905206835f ? INFINITY : y;           // overflow (and +inf) -> inf
  return x != x ? x : y;                              // NaN stays NaN
}

// exp(x) for x <= 0 (the softmax terms once the row max is subtracted; verf's tail,
// whose exponent stays below 3e-8): there 2^n is one normal float (-126 <= n <= 127),
// so it needs one scale factor and no overflow checks. Same reduction and polynomial
// as vexp; -inf and anything below the float range -> 0, NaN stays NaN. Wrong for x
// near 88 and above (no overflow handling).
inline float vexp_nonpos(float x) {
  const float lo = -87.3365478515625f;
  float n;
  float p = exp_reduced(x > lo ? x : lo, &n);  // NaN -> lo, so n stays finite (as in vexp)
  float y = x < lo ? 0.0f : p * pow2i(int32_t(n));
  return x != x ? x : y;
}

// erfc(z) = t exp(-z^2 + erfc_poly(t)) for z >= 0, t = 1 / (1 + z / 2): the
// Chebyshev fit of Numerical Recipes (fractional error < 1.2e-7 in exact arithmetic).
// erfc_poly(t) lies in [-1.2656, 3e-8] for t in [0, 1].
inline float erfc_poly(float t) {
  return -1.26551223f +
         t * (1.00002368f +
              t * (0.37409196f +
                   t * (0.09678418f +
                        t * (-0.18628806f +
                             t * (0.27886807f +
                                  t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
}

inline float verf(float x) {
  float z = std::fabs(x);
  float t = 1.0f / (1.0f + 0.5f * z);
  float poly = erfc_poly(t);
  // The exponent is at most 3e-8 (-z^2 plus erfc_poly, <= 3e-8): vexp_nonpos covers it
  // (2^n for n <= 0), without vexp's overflow handling.
  float erfc = t * vexp_nonpos(-z * z + poly);
  float r = 1.0f - erfc;
  // Below 0.5, 1 - erfc loses erf's relative accuracy (erfc's 1e-7 absolute error is
  // 1e-4 of erf(0.001); 1/erf magnified it, found by the fuzzer): the Taylor series
  // 2x/sqrt(pi) * sum (-x^2)^n / (n! (2n+1)), to x^13 (next term < 1e-9 relative at 0.5).
  float z2 = z * z;
  float series = 1.1283791670955126f * z *
                 (1.0f + z2 * (-1.0f / 3 + z2 * (1.0f / 10 + z2 * (-1.0f / 42 + z2 * (1.0f / 216 +
                  z2 * (-1.0f / 1320 + z2 * (1.0f / 9360)))))));
  r = z < 0.5f ? series : r;
  r = std::copysign(r, x);  // erf(-0) is -0 (1/erf(-0) is -inf; `x < 0 ? -r : r` lost it)
  return x != x ? x : r;
}

inline float vsigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

inline float vtanh(float x) {
  float z = std::fabs(x);
  float e = vexp(-2.0f * z);
  float big = (1.0f - e) / (1.0f + e);
  float z2 = z * z;  // odd Taylor series for |x| < 0.05: x - x^3/3 + 2x^5/15
  float small = z * (1.0f + z2 * (-0.333333333f + z2 * 0.133333333f));
  float r = z < 0.05f ? small : big;
  r = std::copysign(r, x);  // tanh(-0) is -0, as erf's
  return x != x ? x : r;
}

}  // namespace zenith
