// The activations a producer applies to its output as an epilogue (addmm, conv2d)
// and that the standalone ops compute: one definition of each, as scalar functions
// the compiler vectorizes inside plain loops. Internal to the kernels.
#pragma once
#include <cmath>
#include <type_traits>

#include "zenith/error.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"

namespace zenith {

// GELU (exact) = x/2 (1 + erf(x / sqrt 2)) = x/2 erfc(-x / sqrt 2), computed as the
// latter with vmath's erfc (erfc_poly): erfc(z) for z = |x| / sqrt 2 is
// t exp(-x^2 / 2 + erfc_poly(t)) and erfc(-z) = 2 - erfc(z). Relative error ~1e-6 at
// every x, tails included (1 + erf would round the left tail to 0, and costs erf's
// small-|x| series). Three steps with nothing but t and the exponent between them, so
// that gelu_exact_n (activation.cc) can run them as separate loops over a chunk (each
// loop's iterations independent: the CPU overlaps them, where one long chain per
// element was bound by its latency) and still equal gelu_exact bit for bit: -x^2 / 2
// enters the exponent through one fma (exact product), no step's result is a bare
// product another step could fuse.
inline float gelu_t(float x) { return 1.0f / (1.0f + 0.5f * (std::fabs(x) * 0.70710678118654752f)); }
inline float gelu_exponent(float x, float t) { return std::fma(-0.5f * x, x, erfc_poly(t)); }
inline float gelu_finish(float x, float t, float exponent) {
  // exp(exponent) as vexp_nonpos computes it (exponent <= 3e-8), without its selects:
  // clamped at -88, where n = -127 and 2^n's bits (n + 127) << 23 are those of +0, so
  // exp flushes to 0 below about -87.7 by itself (the result there is below 1e-37 in
  // magnitude either way), and a NaN exponent (x NaN) becomes finite while t carries
  // the NaN to the result. x = +-inf: t = 0; -inf gives -inf * 0 = NaN, as PyTorch does.
  float n;
  const float p = exp_reduced5(exponent > -88.0f ? exponent : -88.0f, &n);
  const float e = t * (p * pow2i(int32_t(n)));
  return 0.5f * x * (x < 0 ? e : 2.0f - e);
}
inline float gelu_exact(float x) {
  const float t = gelu_t(x);
  return gelu_finish(x, t, gelu_exponent(x, t));
}
inline float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + vtanh(k * (x + 0.044715f * x * x * x)));
}
// The activations made of compares, selects and arithmetic, each defined once for a
// float and for a GCC vector of floats of the baseline ISA (gemm.cc's epilogue_rows8
// applies them to 8 at a time), so that both give the same answer, sign of zero and
// NaN included. (A 16-float vector cannot be passed by value to these: another ABI
// without AVX-512, which GCC warns about; depthwise.cc writes its selects in place.)
template <class V>
inline V splat(float c) {  // c in every lane; not for -0 (0 + -0 is +0)
  if constexpr (std::is_same_v<V, float>) return c;
  else return V{} + c;
}
// min(max(x, lo), hi) as two selects, so loops over it vectorize; NaN stays NaN (both
// comparisons are false). PyTorch's order of operations for the hard activations.
template <class V>
inline V clamp_f(V x, V lo, V hi) {
  V y = x < lo ? lo : x;
  return y > hi ? hi : y;
}
// NaN stays NaN; -0 stays -0, as PyTorch's relu keeps it (its clamp_min(x, 0)).
template <class V>
inline V relu_f(V x) {
  const V zero = splat<V>(0.0f);
  return x < zero ? zero : x;
}
template <class V>
inline V relu6_f(V x) { return clamp_f(x, splat<V>(0.0f), splat<V>(6.0f)); }  // keeps -0
template <class V>
inline V hard_sigmoid(V x) { return relu6_f(x + 3.0f) / 6.0f; }
template <class V>
inline V hard_swish(V x) { return x * relu6_f(x + 3.0f) / 6.0f; }

// The activations above by compile-time code; any other is the identity here.
template <Activation A, class V>
inline V simple_activation(V x) {
  if constexpr (A == Activation::kRelu) return relu_f(x);
  else if constexpr (A == Activation::kRelu6) return relu6_f(x);
  else if constexpr (A == Activation::kHardsigmoid) return hard_sigmoid(x);
  else if constexpr (A == Activation::kHardswish) return hard_swish(x);
  else return x;
}

// Calls f(std::integral_constant<Activation, A>{}) for an activation simple_activation
// computes (kNone included), so the caller's vector loop is compiled once per A, and
// returns true; false (f not called) for the others.
template <class F>
bool with_simple_activation(Activation act, F&& f) {
  using A = Activation;
  switch (act) {
    case A::kNone: f(std::integral_constant<A, A::kNone>{}); return true;
    case A::kRelu: f(std::integral_constant<A, A::kRelu>{}); return true;
    case A::kRelu6: f(std::integral_constant<A, A::kRelu6>{}); return true;
    case A::kHardsigmoid: f(std::integral_constant<A, A::kHardsigmoid>{}); return true;
    case A::kHardswish: f(std::integral_constant<A, A::kHardswish>{}); return true;
    default: return false;
  }
}

// y[i] = gelu_exact(x[i]) for i < n, bit for bit, in chunks whose three steps run as
// separate loops; AVX-512 where the CPU has it (ZENITH_NO_AVX512=1 keeps AVX2). x == y
// is allowed. activation.cc.
void gelu_exact_n(const float* x, float* y, int64_t n);
// The same as one loop of gelu_exact (the form with_activation's users, such as the
// conv2d epilogue, compile to): the reference gelu_exact_n is tested against, compiled
// with the kernels' flags (a test's own inline gelu_exact is not: no FMA contraction).
void ref_gelu_exact_n(const float* x, float* y, int64_t n);

// How an epilogue applies an activation: the part it computes per value, inside its own
// loop (with_activation(per_value(act), ...)), then the part it applies to each finished
// run of a row (per_row). GELU (exact) is all per row, through gelu_exact_n, whose
// chunked loops run 4x faster than the one-expression form, and whose runs must be long
// (in 32-value pieces it cost qmatmul as much as its int8 GEMM); the others per value.
inline Activation per_value(Activation act) { return act == Activation::kGelu ? Activation::kNone : act; }
inline void per_row(Activation act, float* row, int64_t n) {
  if (act == Activation::kGelu) gelu_exact_n(row, row, n);
}

// Calls f(fn) with fn the activation as a lambda, so the caller's loop is compiled
// once per activation and inlines it (kNone passes the identity).
template <class F>
void with_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::kNone: f([](float x) { return x; }); return;
    case Activation::kRelu: f([](float x) { return relu_f(x); }); return;
    case Activation::kGelu: f([](float x) { return gelu_exact(x); }); return;
    case Activation::kGeluTanh: f([](float x) { return gelu_tanh(x); }); return;
    case Activation::kSilu: f([](float x) { return x * vsigmoid(x); }); return;
    case Activation::kTanh: f([](float x) { return vtanh(x); }); return;
    case Activation::kRelu6: f([](float x) { return relu6_f(x); }); return;
    case Activation::kHardswish: f([](float x) { return hard_swish(x); }); return;
    case Activation::kHardsigmoid: f([](float x) { return hard_sigmoid(x); }); return;
  }
  fail("unknown activation code ", int64_t(act));
}

}  // namespace zenith
