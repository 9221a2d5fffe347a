// Reductions and normalizations. Each reduction is viewed as (outer, reduced, inner)
// over a contiguous block of dims; a reduction over non-adjacent dims runs as
// successive single-block reductions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "zenith/error.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"
#include "zenith/threadpool.h"

namespace zenith {
namespace {

struct Split {
  int64_t outer = 1, red = 1, inner = 1;
};

Split split_at(const std::vector<int64_t>& shape, int lo, int hi) {  // reduce dims [lo, hi)
  Split s;
  for (int d = 0; d < int(shape.size()); ++d) {
    if (d < lo) s.outer *= shape[size_t(d)];
    else if (d < hi) s.red *= shape[size_t(d)];
    else s.inner *= shape[size_t(d)];
  }
  return s;
}

enum class RKind { kSum, kMean, kMax, kMin, kProd };

template <typename T, typename Acc>
void reduce_block(const T* x, T* y, Split s, RKind k) {
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const T* p = x + o * s.red * s.inner + i;
      Acc acc;
      switch (k) {
        case RKind::kSum:
        case RKind::kMean: acc = 0; break;
        case RKind::kProd: acc = 1; break;
        // Floats start at -inf / +inf: a row of -inf has max -inf, not the lowest finite.
        case RKind::kMax:
          acc = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::lowest();
          break;
        case RKind::kMin:
          acc = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::max();
          break;
      }
      bool nan = false;
      for (int64_t r = 0; r < s.red; ++r) {
        Acc v = Acc(p[r * s.inner]);
        switch (k) {
          case RKind::kSum:
          case RKind::kMean: acc += v; break;
          case RKind::kProd: acc *= v; break;
          case RKind::kMax:
            if constexpr (std::is_floating_point_v<Acc>) nan |= std::isnan(v);
            acc = v > acc ? v : acc;
            break;
          case RKind::kMin:
            if constexpr (std::is_floating_point_v<Acc>) nan |= std::isnan(v);
            acc = v < acc ? v : acc;
            break;
        }
      }
      if (k == RKind::kMean) acc = s.red ? acc / Acc(s.red) : Acc(NAN);
      if constexpr (std::is_floating_point_v<Acc>)
        if (nan) acc = NAN;
      y[o * s.inner + i] = T(acc);
    }
  }
}

// The fast path of float sums (and means), reduce_block being its reference: training's
// bias gradients sum (tokens, features) over the tokens, norms and pooling over the last
// dims. Accumulates in double like reduce_block. Reduced dims last (inner == 1): each
// row over eight double lanes. Otherwise whole rows of the reduced block are added into
// a strip of CH accumulators (contiguous, so it vectorizes; reduce_block walks each
// column down with a stride). Rows or strips are split across threads.
void sum_block_f32(const float* x, float* y, Split s) {
  if (s.inner == 1) {
    parallel_for(s.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.red, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        const float* p = x + o * s.red;
        double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t r = 0;
        for (; r + 8 <= s.red; r += 8)
          for (int l = 0; l < 8; ++l) lane[l] += double(p[r + l]);
        double acc = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        for (; r < s.red; ++r) acc += double(p[r]);
        y[o] = float(acc);
      }
    });
    return;
  }
  constexpr int64_t CH = 512;
  int64_t strips = (s.inner + CH - 1) / CH;
  parallel_for(s.outer * strips, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.red * CH, 1)),
               [&](int64_t lo, int64_t hi) {
    double acc[CH];
    for (int64_t t = lo; t < hi; ++t) {
      int64_t o = t / strips, i0 = (t % strips) * CH, n = std::min(CH, s.inner - i0);
      std::fill_n(acc, n, 0.0);
      const float* p = x + o * s.red * s.inner + i0;
      for (int64_t r = 0; r < s.red; ++r) {
        const float* row = p + r * s.inner;
        for (int64_t i = 0; i < n; ++i) acc[i] += double(row[i]);
      }
      for (int64_t i = 0; i < n; ++i) y[o * s.inner + i0 + i] = float(acc[i]);
    }
  });
}

// Sum of floats accumulates in double for rows that are long, so results stay within
// float rounding of PyTorch's pairwise sums.
template <typename T>
void reduce_typed(const TensorRef& x, TensorRef& out, const std::vector<bool>& mask, RKind k) {
  std::vector<int64_t> shape = x.shape;
  std::vector<T> tmp_a, tmp_b;
  const T* src = x.as<T>();
  int r = int(shape.size());
  bool any = false;
  // Process maximal runs of reduced dims from the last to the first.
  int d = r - 1;
  int64_t total_red = 1;
  for (int i = 0; i < r; ++i)
    if (mask[size_t(i)]) total_red *= shape[size_t(i)];
  while (d >= 0) {
    if (!mask[size_t(d)]) {
      --d;
      continue;
    }
    int hi = d + 1;
    while (d >= 0 && mask[size_t(d)]) --d;
    int lo = d + 1;
    Split s = split_at(shape, lo, hi);
    bool last = true;
    for (int e = 0; e < lo; ++e) last = last && !mask[size_t(e)];
    std::vector<T>& dst_buf = (src == tmp_a.data() && !tmp_a.empty()) ? tmp_b : tmp_a;
    T* dst;
    if (last) {
      dst = out.as<T>();
    } else {
      dst_buf.assign(size_t(s.outer * s.inner), T());
      dst = dst_buf.data();
    }
    RKind kk = (k == RKind::kMean) ? RKind::kSum : k;
    if constexpr (std::is_same_v<T, float>) {
      if (kk == RKind::kSum) sum_block_f32(src, dst, s);
      else reduce_block<T, double>(src, dst, s, kk);
    } else {
      reduce_block<T, T>(src, dst, s, kk);
    }
    for (int e = lo; e < hi; ++e) shape[size_t(e)] = 1;
    src = dst;
    any = true;
  }
  if (!any) {
    std::memcpy(out.data, x.data, size_t(x.numel()) * sizeof(T));
    return;
  }
  if (k == RKind::kMean) {
    T* o = out.as<T>();
    int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = total_red ? T(o[i] / T(total_red)) : T(NAN);
  }
}

void run_reduce(const KernelCtx& c, RKind k, const std::vector<int64_t>& dims) {
  const TensorRef& x = c.in[0];
  int r = x.rank();
  std::vector<bool> mask(size_t(r), false);
  if (dims.empty()) std::fill(mask.begin(), mask.end(), true);
  for (int64_t d : dims)
    if (r > 0) mask[size_t(d < 0 ? d + r : d)] = true;  // a 0-d tensor (dim 0 or -1) has no dim to reduce
  if (x.numel() == 0 || r == 0) {
    // Empty reductions: sum 0, prod 1, mean NaN; max/min of nothing is an error in torch.
    int64_t n = c.out[0].numel();
    if (r == 0 && x.numel() == 1) {
      if (x.dtype == DType::b8 && c.out[0].dtype == DType::i64)  // sum of a bool counts it
        *c.out[0].as<int64_t>() = *x.as<bool>() ? 1 : 0;
      else
        std::memcpy(c.out[0].data, x.data, dtype_size(x.dtype));
      return;
    }
    if (n == 0) return;  // a kept dim is 0: the result is empty too, whatever the op (torch agrees)
    ZENITH_CHECK(k != RKind::kMax && k != RKind::kMin, "reduce: max/min over an empty dimension");
    double fill = k == RKind::kProd ? 1.0 : (k == RKind::kMean ? NAN : 0.0);
    if (c.out[0].dtype == DType::f32) std::fill_n(c.out[0].as<float>(), n, float(fill));
    else if (c.out[0].dtype == DType::i64) std::fill_n(c.out[0].as<int64_t>(), n, int64_t(fill));
    else if (c.out[0].dtype == DType::i32) std::fill_n(c.out[0].as<int32_t>(), n, int32_t(fill));
    else fail("reduce: empty input of dtype ", dtype_name(x.dtype));
    return;
  }
  switch (x.dtype) {
    case DType::f32: reduce_typed<float>(x, c.out[0], mask, k); break;
    case DType::i64: reduce_typed<int64_t>(x, c.out[0], mask, k); break;
    case DType::i32: reduce_typed<int32_t>(x, c.out[0], mask, k); break;
    case DType::b8: {  // sum of bools counts them, as int64
      std::vector<int64_t> tmp(size_t(x.numel()));
      for (int64_t i = 0; i < x.numel(); ++i) tmp[size_t(i)] = x.as<bool>()[i];
      TensorRef t{tmp.data(), DType::i64, x.shape};
      if (c.out[0].dtype == DType::i64) {
        reduce_typed<int64_t>(t, c.out[0], mask, k);
      } else {
        std::vector<int64_t> o(size_t(c.out[0].numel()));
        TensorRef to{o.data(), DType::i64, c.out[0].shape};
        reduce_typed<int64_t>(t, to, mask, k);
        for (size_t i = 0; i < o.size(); ++i) c.out[0].as<bool>()[i] = o[i] != 0;
      }
      break;
    }
    default: fail("reduce: no kernel for dtype ", dtype_name(x.dtype));
  }
}

}  // namespace

void run_reduce_sum(const KernelCtx& c) { run_reduce(c, RKind::kSum, c.a<attrs::reduce_sum>().dims); }
void run_reduce_mean(const KernelCtx& c) { run_reduce(c, RKind::kMean, c.a<attrs::reduce_mean>().dims); }
void run_reduce_max(const KernelCtx& c) { run_reduce(c, RKind::kMax, c.a<attrs::reduce_max>().dims); }
void run_reduce_min(const KernelCtx& c) { run_reduce(c, RKind::kMin, c.a<attrs::reduce_min>().dims); }
void run_reduce_prod(const KernelCtx& c) { run_reduce(c, RKind::kProd, c.a<attrs::reduce_prod>().dims); }

void run_argmax(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  if (c.out[0].numel() == 0) return;  // another dim is 0: an empty result, as in torch
  ZENITH_CHECK(x.numel() > 0, "argmax: empty input");
  Split s;
  if (const auto& dim = c.a<attrs::argmax>().dim) {
    int64_t d = *dim;
    if (d < 0) d += std::max(x.rank(), 1);
    s = x.rank() == 0 ? Split{} : split_at(x.shape, int(d), int(d) + 1);
  } else {
    s.red = x.numel();
  }
  int64_t* y = c.out[0].as<int64_t>();
  auto body = [&](auto t) {
    using T = decltype(t);
    const T* p = x.as<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        const T* q = p + o * s.red * s.inner + i;
        int64_t best = 0;
        T bv = q[0];
        for (int64_t r = 1; r < s.red; ++r) {
          T v = q[r * s.inner];
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(bv)) break;  // the first NaN wins, as in torch
            if (std::isnan(v) || v > bv) { bv = v; best = r; }
          } else if (v > bv) {
            bv = v;
            best = r;
          }
        }
        y[o * s.inner + i] = best;
      }
  };
  if (x.dtype == DType::f32) body(float{});
  else if (x.dtype == DType::i64) body(int64_t{});
  else if (x.dtype == DType::i32) body(int32_t{});
  else if (x.dtype == DType::b8) body(bool{});  // torch.max(bool, dim) returns indices too
  else fail("argmax: no kernel for dtype ", dtype_name(x.dtype));
}

void run_cumsum(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  int64_t d = c.a<attrs::cumsum>().dim;
  if (d < 0) d += std::max(x.rank(), 1);
  Split s = x.rank() == 0 ? Split{} : split_at(x.shape, int(d), int(d) + 1);
  auto body = [&](auto t) {
    using T = decltype(t);
    const T* p = x.as<T>();
    T* q = c.out[0].as<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        T acc = 0;
        for (int64_t r = 0; r < s.red; ++r) {
          int64_t k = (o * s.red + r) * s.inner + i;
          acc += p[k];
          q[k] = acc;
        }
      }
  };
  if (x.dtype == DType::f32) body(float{});
  else if (x.dtype == DType::i64) body(int64_t{});
  else if (x.dtype == DType::i32) body(int32_t{});
  else fail("cumsum: no kernel for dtype ", dtype_name(x.dtype));
}

// ---- softmax ----
namespace {
void softmax_impl(const KernelCtx& c, bool log, int64_t d) {
  const TensorRef& x = c.in[0];
  if (d < 0) d += std::max(x.rank(), 1);
  Split s = x.rank() == 0 ? Split{} : split_at(x.shape, int(d), int(d) + 1);
  const float* p = x.as<float>();
  float* q = c.out[0].as<float>();
  parallel_for(s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(s.red, 1)), [&](int64_t lo, int64_t hi) {
    std::vector<float> row(size_t(s.red));
    for (int64_t it = lo; it < hi; ++it) {
      int64_t o = it / s.inner, i = it % s.inner;
      const float* src = p + o * s.red * s.inner + i;
      float* dst = q + o * s.red * s.inner + i;
      float m = -INFINITY;
      bool nan = false;
      for (int64_t r = 0; r < s.red; ++r) {
        float v = src[r * s.inner];
        row[size_t(r)] = v;
        nan |= v != v;
        m = v > m ? v : m;
      }
      if (nan) m = NAN;
      if (m == -INFINITY) m = 0;  // an all -inf row gives NaN below, as in torch
      float sum = 0;
      for (int64_t r = 0; r < s.red; ++r) {
        float e = vexp_nonpos(row[size_t(r)] - m);  // <= 0 (or NaN): m is the row max
        sum += e;
        if (!log) row[size_t(r)] = e;
      }
      if (log) {
        // (x - max) - log(sum), as torch: x - (max + log(sum)) loses log(sum) when max
        // is large (rows of 1e30 gave 0 where log(1/2) is right; found by the fuzzer)
        float ls = std::log(sum);
        for (int64_t r = 0; r < s.red; ++r) dst[r * s.inner] = (row[size_t(r)] - m) - ls;
      } else {
        float inv = 1.0f / sum;
        for (int64_t r = 0; r < s.red; ++r) dst[r * s.inner] = row[size_t(r)] * inv;
      }
    }
  });
}
}  // namespace

void run_softmax(const KernelCtx& c) { softmax_impl(c, false, c.a<attrs::softmax>().dim); }
void run_log_softmax(const KernelCtx& c) { softmax_impl(c, true, c.a<attrs::log_softmax>().dim); }

// ---- normalization ----
namespace {
// The two sums of a layer norm row, in double: sum(x), and with kSquares sum((x - mu)^2). Double keeps
// the variance exact where float did not: a float mean of rows far from zero (x + 1e3)
// was twice eager's error, and squares of values past 1.8e19 overflowed float, so rows
// of large magnitude normalized to the bias (eager gives NaN there; float64 a finite
// answer, as here). With AVX2, 8 floats at a time widen into two 4-double vectors and
// four accumulators; GCC had left most of a 16-accumulator loop scalar. The op with
// the residual on 128 x 768, 2 threads, Zen 4 (family 25 model 17), alternating
// binaries: 21.5 -> 19.6 us with the rows in cache, 32.7 -> 29.5 us from L3.
template <bool kSquares>
double row_sum(const float* p, int64_t n, double mu) {
  int64_t i = 0;
  double total = 0;
#if defined(__AVX2__)
  const __m256d m = _mm256_set1_pd(mu);
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  auto step = [&](__m256d& a, __m128 v) {
    const __m256d d = _mm256_cvtps_pd(v);
    if constexpr (kSquares) {
      const __m256d c = _mm256_sub_pd(d, m);
      a = _mm256_fmadd_pd(c, c, a);
    } else {
      a = _mm256_add_pd(a, d);
    }
  };
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(p + i), b = _mm256_loadu_ps(p + i + 8);
    step(acc[0], _mm256_castps256_ps128(a));
    step(acc[1], _mm256_extractf128_ps(a, 1));
    step(acc[2], _mm256_castps256_ps128(b));
    step(acc[3], _mm256_extractf128_ps(b, 1));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
  total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
  for (; i < n; ++i) {
    const double d = double(p[i]);
    if constexpr (kSquares) total += (d - mu) * (d - mu);
    else total += d;
  }
  return total;
}
}  // namespace

void run_layer_norm(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  const auto& a = c.a<attrs::layer_norm>();
  int64_t k = a.normalized_ndim;
  float eps = float(a.eps);
  int64_t n = 1;
  for (int64_t d = x.rank() - k; d < x.rank(); ++d) n *= x.shape[size_t(d)];
  int64_t rows = n ? x.numel() / n : 0;
  const float* w = c.in[1].as<float>();
  const float* b = c.in[2].as<float>();
  // With a residual (fuse_residual_norm) the row is x + residual, written to the output
  // row first (the add kernel's a + b in float) and normalized there in place: the sum
  // never goes to memory of its own.
  const float* res = c.in.size() == 4 ? c.in[3].as<float>() : nullptr;
  const float* px = x.as<float>();
  float* out = c.out[0].as<float>();
  parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      float* q = out + r * n;
      const float* row = px + r * n;
      if (res) {
        const float* rr = res + r * n;
        for (int64_t i = 0; i < n; ++i) q[i] = row[i] + rr[i];
        row = q;
      }
      // Two passes (the second centred), so the variance is exact.
      const double mu = row_sum<false>(row, n, 0.0) / double(n);
      const double var = row_sum<true>(row, n, mu) / double(n);
      const float rstd = float(1.0 / std::sqrt(var + double(eps)));
      const float muf = float(mu);
      for (int64_t i = 0; i < n; ++i) q[i] = (row[i] - muf) * rstd * w[i] + b[i];
    }
  });
}

void run_rms_norm(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  const auto& a = c.a<attrs::rms_norm>();
  int64_t k = a.normalized_ndim;
  float eps = float(a.eps);
  int64_t n = 1;
  for (int64_t d = x.rank() - k; d < x.rank(); ++d) n *= x.shape[size_t(d)];
  int64_t rows = n ? x.numel() / n : 0;
  const float* w = c.in[1].as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = x.as<float>() + r * n;
    float* q = c.out[0].as<float>() + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(p[i]) * p[i];
    float rs = float(1.0 / std::sqrt(ss / double(n) + eps));
    for (int64_t i = 0; i < n; ++i) q[i] = p[i] * rs * w[i];
  }
}

void run_batch_norm(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  float eps = float(c.a<attrs::batch_norm>().eps);
  int64_t N = x.shape[0], C = x.shape[1];
  if (N * C == 0) return;
  int64_t inner = x.numel() / (N * C);
  const float *w = c.in[1].as<float>(), *b = c.in[2].as<float>(), *mu = c.in[3].as<float>(), *var = c.in[4].as<float>();
  parallel_for(N * C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t nc = lo; nc < hi; ++nc) {
      int64_t ch = nc % C;
      float scale, shift;
      batch_norm_affine(w[ch], b[ch], mu[ch], var[ch], eps, &scale, &shift);
      const float* p = x.as<float>() + nc * inner;
      float* q = c.out[0].as<float>() + nc * inner;
      for (int64_t j = 0; j < inner; ++j) q[j] = p[j] * scale + shift;
    }
  });
}

}  // namespace zenith
