// The activations a producer applies to its output as an epilogue (addmm, conv2d)
// and that the standalone ops compute: one definition of each, as scalar functions
// the compiler vectorizes inside plain loops. Internal to the kernels.
#pragma once
#include <cmath>

#include "zenith/error.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"

namespace zenith {

inline float gelu_exact(float x) { return 0.5f * x * (1.0f + verf(x * 0.70710678118654752f)); }
inline float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + vtanh(k * (x + 0.044715f * x * x * x)));
}
inline float relu_f(float x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0f); }  // keeps NaN
// min(max(x, lo), hi) as two selects, so loops over it vectorize; NaN stays NaN (both
// comparisons are false). PyTorch's order of operations for the hard activations.
inline float clamp_f(float x, float lo, float hi) {
  float y = x < lo ? lo : x;
  return y > hi ? hi : y;
}
inline float relu6_f(float x) { return clamp_f(x, 0.0f, 6.0f); }
inline float hard_sigmoid(float x) { return clamp_f(x + 3.0f, 0.0f, 6.0f) / 6.0f; }
inline float hard_swish(float x) { return x * clamp_f(x + 3.0f, 0.0f, 6.0f) / 6.0f; }

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
