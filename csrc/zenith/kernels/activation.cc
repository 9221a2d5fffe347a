// Activations over arrays: GELU (exact) in chunks of three loops, for AVX2 and AVX-512.
//
// Why: gelu_exact as one expression per element is a chain of ~60 dependent operations
// (a division, erfc_poly's ten terms, exp); compiled as one vectorized loop, each
// iteration waits on the last one's chain and the loop ran at about the same time per
// iteration on 8 and 16 lanes (Zen 5: 1.2 ns per value single-threaded against
// PyTorch's 0.15 on two threads). Split into three loops over a chunk of 128 values
// (t, the exponent, the result; the chunk's t and exponent in L1), every loop's
// iterations are independent: 0.59 ns per value on AVX2, 0.29 on AVX-512 (measured on
// 196608 values, the GELU of one MiniLM layer at seq 128). The steps are activation.h's,
// so the values equal gelu_exact's bit for bit on both ISAs. Then throughput-bound on
// the two FMA pipes: the last step's exp without vexp's selects and with a degree-5
// polynomial took AVX2 on Zen 3 from 0.94 to 0.77 ns per value (one thread).
#include <algorithm>

#include "zenith/kernels/activation.h"
#include "zenith/kernels/gemm_internal.h"

namespace zenith {
namespace {

constexpr int64_t kChunk = 128;

__attribute__((always_inline)) inline void gelu_chunks(const float* x, float* y, int64_t n) {
  alignas(64) float t[kChunk], e[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    const float* xs = x + i0;
    float* ys = y + i0;
    for (int64_t i = 0; i < m; ++i) t[i] = gelu_t(xs[i]);
    for (int64_t i = 0; i < m; ++i) e[i] = gelu_exponent(xs[i], t[i]);
    for (int64_t i = 0; i < m; ++i) ys[i] = gelu_finish(xs[i], t[i], e[i]);  // ys may be xs
  }
}

__attribute__((flatten)) void gelu_avx2(const float* x, float* y, int64_t n) { gelu_chunks(x, y, n); }

#if defined(__x86_64__)
__attribute__((flatten, target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c"))) void gelu_avx512(const float* x,
                                                                                                      float* y,
                                                                                                      int64_t n) {
  gelu_chunks(x, y, n);
}
#endif

using GeluFn = void (*)(const float*, float*, int64_t);
GeluFn pick_gelu() {
#if defined(__x86_64__)
  if (gemm_detail::kernels_use_avx512()) return gelu_avx512;
#endif
  return gelu_avx2;
}

}  // namespace

void gelu_exact_n(const float* x, float* y, int64_t n) {
  static const GeluFn fn = pick_gelu();
  fn(x, y, n);
}

void ref_gelu_exact_n(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_exact(x[i]);
}

}  // namespace zenith
