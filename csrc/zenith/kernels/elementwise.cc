// Elementwise kernels: unary maps, broadcasting binary maps, where, cast.
// The loops are plain C++ over contiguous inner runs so the compiler vectorizes
// them; the op semantics are the scalar functors below, which double as the
// reference (the broadcast iterator is exercised against PyTorch in the op tests).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "zenith/error.h"
#include "zenith/kernels/activation.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"
#include "zenith/threadpool.h"

namespace zenith {
namespace {

// ---- broadcast iteration ----
// Walks the output in row-major order, calling body(out_offset, in_offsets..., inner_len,
// inner_strides...) once per contiguous inner run, the runs split over the threads.
// Dims are coalesced first: size-1 dims dropped, and a dim merged into the next inner one
// wherever every input steps through both as through one (a [1, C, 1, 1] bias over
// [N, C, H, W] walks [N, C, H * W]), so runs are as long as the layouts allow.
constexpr int64_t kElemChunk = 1 << 14;  // elements per thread chunk, below which loops stay serial

struct BroadcastIter {
  std::vector<int64_t> shape;                 // output shape, coalesced (rank >= 1)
  std::vector<std::vector<int64_t>> strides;  // per input, in elements over `shape` (0 where broadcast)
  int64_t numel = 1;

  BroadcastIter(const std::vector<int64_t>& out_shape, const std::vector<const TensorRef*>& ins) {
    int r = int(out_shape.size());
    std::vector<std::vector<int64_t>> full;
    for (const TensorRef* t : ins) {
      std::vector<int64_t> s(size_t(r), 0);
      std::vector<int64_t> cs = contiguous_strides(t->shape);
      int off = r - t->rank();
      for (int d = 0; d < t->rank(); ++d) s[size_t(off + d)] = t->shape[size_t(d)] == 1 ? 0 : cs[size_t(d)];
      full.push_back(std::move(s));
    }
    strides.resize(ins.size());
    for (int d = 0; d < r; ++d) {
      int64_t n = out_shape[size_t(d)];
      numel *= n;
      if (n == 1) continue;
      bool merge = !shape.empty();
      for (size_t k = 0; k < ins.size() && merge; ++k) merge = strides[k].back() == full[k][size_t(d)] * n;
      if (merge) {
        shape.back() *= n;
        for (size_t k = 0; k < ins.size(); ++k) strides[k].back() = full[k][size_t(d)];
      } else {
        shape.push_back(n);
        for (size_t k = 0; k < ins.size(); ++k) strides[k].push_back(full[k][size_t(d)]);
      }
    }
    if (shape.empty()) {  // one element
      shape.push_back(1);
      for (auto& s : strides) s.push_back(0);
    }
  }

  int rank() const { return int(shape.size()); }
  int64_t inner() const { return shape.back(); }

  // Offsets of each input at the start of row `row` (a row: one run of the last dim).
  void row_offsets(int64_t row, std::vector<int64_t>& offs, std::vector<int64_t>& idx) const {
    int r = rank();
    std::fill(offs.begin(), offs.end(), 0);
    idx.assign(size_t(r), 0);
    for (int d = r - 2; d >= 0; --d) {
      size_t du = size_t(d);
      idx[du] = row % shape[du];
      row /= shape[du];
      for (size_t k = 0; k < offs.size(); ++k) offs[k] += idx[du] * strides[k][du];
    }
  }

  // Steps offs / idx from one row to the next.
  void next_row(std::vector<int64_t>& offs, std::vector<int64_t>& idx) const {
    for (int d = rank() - 2; d >= 0; --d) {
      size_t du = size_t(d);
      ++idx[du];
      for (size_t k = 0; k < offs.size(); ++k) offs[k] += strides[k][du];
      if (idx[du] < shape[du]) return;
      for (size_t k = 0; k < offs.size(); ++k) offs[k] -= strides[k][du] * shape[du];
      idx[du] = 0;
    }
  }

  template <typename F>
  void run(F&& body) const {
    if (numel == 0) return;
    size_t n_in = strides.size();
    int64_t inner = this->inner();
    std::vector<int64_t> inner_s(n_in);
    for (size_t k = 0; k < n_in; ++k) inner_s[k] = strides[k].back();
    // chunks of elements, not rows: one long row (a coalesced same-shape op) splits too
    parallel_for(numel, kElemChunk, [&](int64_t lo, int64_t hi) {
      std::vector<int64_t> offs(n_in), at(n_in), idx;
      int64_t row = lo / inner, i = lo % inner;
      row_offsets(row, offs, idx);
      for (int64_t o = lo; o < hi;) {
        int64_t len = std::min(inner - i, hi - o);
        for (size_t k = 0; k < n_in; ++k) at[k] = offs[k] + i * inner_s[k];
        body(o, at, len, inner_s);
        o += len;
        i = 0;
        if (o < hi) next_row(offs, idx);
      }
    });
  }
};

bool same_shape(const TensorRef& a, const TensorRef& b) { return a.shape == b.shape; }

template <typename T, typename R, typename F>
void binary_map(const TensorRef& a, const TensorRef& b, TensorRef& o, F f) {
  const T* pa = a.as<T>();
  const T* pb = b.as<T>();
  R* po = o.as<R>();
  if (same_shape(a, b) && same_shape(a, o)) {
    parallel_for(o.numel(), kElemChunk, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) po[i] = f(pa[i], pb[i]);
    });
    return;
  }
  BroadcastIter it(o.shape, {&a, &b});
  it.run([&](int64_t oo, const std::vector<int64_t>& offs, int64_t len, const std::vector<int64_t>& s) {
    const T* x = pa + offs[0];
    const T* y = pb + offs[1];
    R* z = po + oo;
    if (s[0] == 1 && s[1] == 1) {
      for (int64_t i = 0; i < len; ++i) z[i] = f(x[i], y[i]);
    } else if (s[0] == 1 && s[1] == 0) {
      T yv = *y;
      for (int64_t i = 0; i < len; ++i) z[i] = f(x[i], yv);
    } else if (s[0] == 0 && s[1] == 1) {
      T xv = *x;
      for (int64_t i = 0; i < len; ++i) z[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < len; ++i) z[i] = f(x[i * s[0]], y[i * s[1]]);
    }
  });
}

template <typename T, typename F>
void unary_map(const TensorRef& a, TensorRef& o, F f) {
  const T* p = a.as<T>();
  T* q = o.as<T>();
  parallel_for(o.numel(), kElemChunk, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) q[i] = f(p[i]);
  });
}

// Dispatches a generic lambda over the numeric dtypes an elementwise op supports.
template <typename F>
void dispatch_numeric(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::f32: f(float{}); return;
    case DType::i64: f(int64_t{}); return;
    case DType::i32: f(int32_t{}); return;
    case DType::b8: f(bool{}); return;
    default: fail(op, ": no kernel for dtype ", dtype_name(d));
  }
}

// The lowest integer divided by -1 overflows, and x86's idiv traps (SIGFPE) on it: a
// quotient by -1 is -a, wrapping as two's complement does (the lowest stays the lowest,
// as PyTorch's floor division gives; its trunc division traps).
template <typename T> T negate_wrapping(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(a));
}

template <typename T> T truncdiv_int(T a, T b) {
  if (b == 0) fail("div: integer division by zero");
  return b == -1 ? negate_wrapping(a) : T(a / b);
}

template <typename T> T floordiv_int(T a, T b) {
  if (b == 0) fail("div: integer division by zero");
  if (b == -1) return negate_wrapping(a);
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Calls use(f) with pow's float function for exponent e, a scalar (NaN: the exponent
// varies by element or is a tensor). PyTorch special-cases these scalar exponents (GELU's
// x^3, norms' x^2, x^-0.5) and computes them without a pow call; so do run_pow and fused
// chains (a tensor exponent, pow's attribute tensor_exponent, is never special-cased).
template <typename Use>
void with_pow_f(float e, Use&& use) {
  if (e == 2.0f) use([](float a, float) { return a * a; });
  else if (e == 3.0f) use([](float a, float) { return a * a * a; });
  else if (e == 0.5f) use([](float a, float) { return std::sqrt(a); });
  else if (e == -0.5f) use([](float a, float) { return 1.0f / std::sqrt(a); });
  else if (e == -1.0f) use([](float a, float) { return 1.0f / a; });
  else if (e == -2.0f) use([](float a, float) { return 1.0f / (a * a); });
  else
    use([](float a, float b) {  // (not sqrt at b = 0.5: pow(-0, 0.5) is +0, pow(-inf, 0.5) +inf)
      if (b == 2.0f) return a * a;
      return std::pow(a, b);
    });
}

}  // namespace

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = int(shape.size()) - 2; d >= 0; --d) s[size_t(d)] = s[size_t(d + 1)] * shape[size_t(d + 1)];
  return s;
}

// ---- unary float ops ----
// The float functions of the unary ops, one list for their own kernels and for fused
// chains (run_fused), so both compute bit-identical values.
#define ZENITH_FLOAT_UNARY(X)                                        \
  X(exp, vexp(x))                                                    \
  X(log, std::log(x))                                                \
  X(log1p, std::log1p(x))                                            \
  X(expm1, std::expm1(x))                                            \
  X(sqrt, std::sqrt(x))                                              \
  X(rsqrt, 1.0f / std::sqrt(x))                                      \
  X(reciprocal, 1.0f / x)                                            \
  X(sin, std::sin(x))                                                \
  X(cos, std::cos(x))                                                \
  X(tanh, vtanh(x))                                                  \
  X(erf, verf(x))                                                    \
  X(sigmoid, vsigmoid(x))                                            \
  X(silu, x * vsigmoid(x))                                           \
  X(hardswish, hard_swish(x))                                        \
  X(hardsigmoid, hard_sigmoid(x))
// Binary float ops (pow, with its scalar-exponent forms, is separate).
#define ZENITH_FLOAT_BINARY(X)                                                  \
  X(add, a + b)                                                                 \
  X(sub, a - b)                                                                 \
  X(mul, a * b)                                                                 \
  X(div, a / b)                                                                 \
  X(maximum, (std::isnan(a) || std::isnan(b)) ? NAN : (a > b ? a : b))          \
  X(minimum, (std::isnan(a) || std::isnan(b)) ? NAN : (a < b ? a : b))

namespace {
#define FLOAT_FN(name, expr) inline float name##_f(float x) { return expr; }
ZENITH_FLOAT_UNARY(FLOAT_FN)
#undef FLOAT_FN
#define FLOAT_FN2(name, expr) inline float name##_f(float a, float b) { return expr; }
ZENITH_FLOAT_BINARY(FLOAT_FN2)
#undef FLOAT_FN2
}  // namespace

#define FLOAT_UNARY(name, expr)                                                \
  void run_##name(const KernelCtx& c) {                                        \
    unary_map<float>(c.in[0], c.out[0], [](float x) { return name##_f(x); }); \
  }
ZENITH_FLOAT_UNARY(FLOAT_UNARY)
#undef FLOAT_UNARY

void run_gelu(const KernelCtx& c) {
  // Lambdas, not function pointers, so the maps inline and vectorize.
  if (c.a<attrs::gelu>().approximate == GeluApprox::kTanh) unary_map<float>(c.in[0], c.out[0], [](float x) { return gelu_tanh(x); });
  else {
    const float* x = c.in[0].as<float>();
    float* y = c.out[0].as<float>();
    parallel_for(c.out[0].numel(), kElemChunk, [&](int64_t lo, int64_t hi) { gelu_exact_n(x + lo, y + lo, hi - lo); });
  }
}

// ---- unary numeric ops (float and integer) ----
// Float forms of the unary ops that also take integers; fused chains use them too.
inline float neg_f(float x) { return -x; }
inline float abs_f(float x) { return std::fabs(x); }  // abs(-0) is +0 (`x < 0 ? -x : x` kept -0; fuzzer)

template <typename FloatF, typename IntF>
void numeric_unary(const KernelCtx& c, const char* name, FloatF ff, IntF fi) {
  dispatch_numeric(c.in[0].dtype, name, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) unary_map<T>(c.in[0], c.out[0], ff);
    else if constexpr (!std::is_same_v<T, bool>) unary_map<T>(c.in[0], c.out[0], [&](T x) { return T(fi(x)); });
  });
}
void run_neg(const KernelCtx& c) {
  numeric_unary(c, "neg", [](float x) { return neg_f(x); }, [](auto x) { return -x; });
}
void run_abs(const KernelCtx& c) {
  numeric_unary(c, "abs", [](float x) { return abs_f(x); }, [](auto x) { return x < 0 ? -x : x; });
}
void run_relu(const KernelCtx& c) {
  numeric_unary(c, "relu", [](float x) { return relu_f(x); }, [](auto x) { return x > 0 ? x : decltype(x)(0); });
}
void run_floor(const KernelCtx& c) {
  if (c.in[0].dtype == DType::f32) unary_map<float>(c.in[0], c.out[0], [](float x) { return std::floor(x); });
  else std::memcpy(c.out[0].data, c.in[0].data, size_t(c.in[0].numel()) * dtype_size(c.in[0].dtype));
}
void run_ceil(const KernelCtx& c) {
  if (c.in[0].dtype == DType::f32) unary_map<float>(c.in[0], c.out[0], [](float x) { return std::ceil(x); });
  else std::memcpy(c.out[0].data, c.in[0].data, size_t(c.in[0].numel()) * dtype_size(c.in[0].dtype));
}
void run_clamp(const KernelCtx& c) {
  const auto& a = c.a<attrs::clamp>();
  bool has_lo = a.min.has_value(), has_hi = a.max.has_value();
  double lo = a.min.value_or(0), hi = a.max.value_or(0);
  dispatch_numeric(c.in[0].dtype, "clamp", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) {
      // An absent bound is the type's extreme (infinity for float), so the map is two
      // selects that vectorize (NaN stays NaN: both comparisons are false).
      using Lim = std::numeric_limits<T>;
      const T l = has_lo ? T(lo) : (Lim::has_infinity ? -Lim::infinity() : Lim::lowest());
      const T h = has_hi ? T(hi) : (Lim::has_infinity ? Lim::infinity() : Lim::max());
      unary_map<T>(c.in[0], c.out[0], [=](T x) {
        T y = x < l ? l : x;
        return y > h ? h : y;
      });
    }
  });
}
void run_logical_not(const KernelCtx& c) {
  const TensorRef& a = c.in[0];
  bool* o = c.out[0].as<bool>();
  int64_t n = a.numel();
  dispatch_numeric(a.dtype, "logical_not", [&](auto t) {
    using T = decltype(t);
    const T* p = a.as<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = !(p[i] != T(0));
  });
}
void run_isnan(const KernelCtx& c) {
  const TensorRef& a = c.in[0];
  bool* o = c.out[0].as<bool>();
  int64_t n = a.numel();
  if (a.dtype == DType::f32) {
    const float* p = a.as<float>();
    for (int64_t i = 0; i < n; ++i) o[i] = std::isnan(p[i]);
  } else {
    std::memset(o, 0, size_t(n));
  }
}

// ---- cast: every dtype pair ----
namespace {
template <typename T> float load_f(const T* p, int64_t i, DType d) {
  if constexpr (std::is_same_v<T, uint16_t>) return d == DType::f16 ? f16_to_f32(p[i]) : bf16_to_f32(p[i]);
  else return float(p[i]);
}
double load_as_double(const void* p, int64_t i, DType d) {
  switch (d) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::i64: return double(static_cast<const int64_t*>(p)[i]);
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::b8: return static_cast<const bool*>(p)[i] ? 1.0 : 0.0;
    case DType::u8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}
}  // namespace

void cast_buffer(const void* src, DType sd, void* dst, DType dd, int64_t n) {
  if (sd == dd) {
    std::memcpy(dst, src, size_t(n) * dtype_size(sd));
    return;
  }
  // Fast paths for the float conversions the runtime uses around half-precision ops.
  if (dd == DType::f32 && (sd == DType::f16 || sd == DType::bf16)) {
    const uint16_t* p = static_cast<const uint16_t*>(src);
    float* q = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) q[i] = load_f(p, i, sd);
    return;
  }
  if (sd == DType::f32 && (dd == DType::f16 || dd == DType::bf16)) {
    const float* p = static_cast<const float*>(src);
    uint16_t* q = static_cast<uint16_t*>(dst);
    if (dd == DType::f16) for (int64_t i = 0; i < n; ++i) q[i] = f32_to_f16(p[i]);
    else for (int64_t i = 0; i < n; ++i) q[i] = f32_to_bf16(p[i]);
    return;
  }
  // i64 <-> i64 through double would lose precision above 2^53, so integers go direct.
  // Integers narrow modulo 2^bits (to u8 as well, as torch does on x86).
  auto is_int = [](DType d) { return d == DType::i64 || d == DType::i32 || d == DType::b8 || d == DType::u8; };
  if (is_int(sd) && is_int(dd)) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = sd == DType::i64 ? static_cast<const int64_t*>(src)[i]
                : sd == DType::i32 ? static_cast<const int32_t*>(src)[i]
                : sd == DType::u8  ? static_cast<const uint8_t*>(src)[i]
                                   : int64_t(static_cast<const bool*>(src)[i]);
      if (dd == DType::i64) static_cast<int64_t*>(dst)[i] = v;
      else if (dd == DType::i32) static_cast<int32_t*>(dst)[i] = int32_t(v);
      else if (dd == DType::u8) static_cast<uint8_t*>(dst)[i] = uint8_t(v);
      else static_cast<bool*>(dst)[i] = v != 0;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    double v = load_as_double(src, i, sd);
    switch (dd) {
      case DType::f32: static_cast<float*>(dst)[i] = float(v); break;
      case DType::f16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(float(v)); break;
      case DType::bf16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(float(v)); break;
      case DType::i64: static_cast<int64_t*>(dst)[i] = std::isfinite(v) ? int64_t(v) : INT64_MIN; break;
      case DType::i32: static_cast<int32_t*>(dst)[i] = std::isfinite(v) ? int32_t(int64_t(v)) : INT32_MIN; break;
      case DType::b8: static_cast<bool*>(dst)[i] = v != 0.0; break;  // NaN != 0 is true, as in torch
      case DType::u8: static_cast<uint8_t*>(dst)[i] = std::isfinite(v) ? uint8_t(int64_t(v)) : 0; break;
    }
  }
}

void run_cast(const KernelCtx& c) {
  cast_buffer(c.in[0].data, c.in[0].dtype, c.out[0].data, c.out[0].dtype, c.out[0].numel());
}

// ---- binary ops ----
#define ARITH(name, expr_f, expr_i)                                                    \
  void run_##name(const KernelCtx& c) {                                                \
    dispatch_numeric(c.in[0].dtype, #name, [&](auto t) {                               \
      using T = decltype(t);                                                           \
      if constexpr (std::is_same_v<T, float>)                                          \
        binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return expr_f; }); \
      else                                                                             \
        binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return T(expr_i); }); \
    });                                                                                \
  }
ARITH(add, add_f(a, b), a + b)
ARITH(sub, sub_f(a, b), a - b)
ARITH(mul, mul_f(a, b), a * b)
ARITH(maximum, maximum_f(a, b), a > b ? a : b)
ARITH(minimum, minimum_f(a, b), a < b ? a : b)
#undef ARITH

void run_div(const KernelCtx& c) {
  int64_t mode = int64_t(c.a<attrs::div>().rounding);  // Rounding: 0 true, 1 floor, 2 trunc
  dispatch_numeric(c.in[0].dtype, "div", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (mode == 0) binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return div_f(a, b); });
      else if (mode == 1) binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return std::floor(a / b); });
      else binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return std::trunc(a / b); });
    } else if constexpr (!std::is_same_v<T, bool>) {
      ZENITH_CHECK(mode != 0, "div: true division of integers needs float inputs");
      if (mode == 1) binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return floordiv_int(a, b); });
      else
        binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return truncdiv_int(a, b); });
    } else {
      fail("div: bool inputs");
    }
  });
}

void run_pow(const KernelCtx& c) {
  dispatch_numeric(c.in[0].dtype, "pow", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      // A scalar exponent PyTorch special-cases (GELU's x^3, norms' x^2, x^-0.5) is
      // computed the way it does, in a loop without a per-element pow call.
      float e = c.in[1].numel() == 1 && !c.a<attrs::pow>().tensor_exponent ? *c.in[1].as<float>() : NAN;
      with_pow_f(e, [&](auto f) { binary_map<T, T>(c.in[0], c.in[1], c.out[0], f); });
    } else if constexpr (!std::is_same_v<T, bool>) {
      binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) {
        T r = 1;
        if (b < 0) return T(a == 1 ? 1 : (a == -1 ? (b % 2 != 0 ? -1 : 1) : 0));  // (-b overflows at the lowest b)
        for (T i = 0; i < b; ++i) r *= a;
        return r;
      });
    } else {
      fail("pow: bool inputs");
    }
  });
}

void run_remainder(const KernelCtx& c) {
  dispatch_numeric(c.in[0].dtype, "remainder", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) {
        T r = std::fmod(a, b);
        return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
      });
    } else if constexpr (!std::is_same_v<T, bool>) {
      binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) {
        // C++'s remainder takes the dividend's sign; moved to the divisor's. (x mod -1 is 0:
        // a % -1 would trap at the lowest a; a - floordiv(a, b) * b overflows at INT64_MAX mod -2.)
        if (b == 0) fail("div: integer division by zero");
        if (b == -1) return T(0);
        const T r = T(a % b);
        return r != 0 && ((r < 0) != (b < 0)) ? T(r + b) : r;
      });
    } else {
      fail("remainder: bool inputs");
    }
  });
}

#define CMP(name, op)                                                                           \
  void run_##name(const KernelCtx& c) {                                                         \
    dispatch_numeric(c.in[0].dtype, #name, [&](auto t) {                                        \
      using T = decltype(t);                                                                    \
      binary_map<T, bool>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return bool(a op b); });   \
    });                                                                                         \
  }
CMP(eq, ==)
CMP(ne, !=)
CMP(lt, <)
CMP(le, <=)
CMP(gt, >)
CMP(ge, >=)
#undef CMP

void run_logical_and(const KernelCtx& c) {
  binary_map<bool, bool>(c.in[0], c.in[1], c.out[0], [](bool a, bool b) { return a && b; });
}
void run_logical_or(const KernelCtx& c) {
  binary_map<bool, bool>(c.in[0], c.in[1], c.out[0], [](bool a, bool b) { return a || b; });
}

// A branch-free select of 4-byte elements (a data-dependent branch mispredicts on half of
// a backward mask's elements): the mask widened to all-ones or zero, the bits blended.
// Strides are 0 (broadcast) or 1; the loops vectorize.
template <int SM, int SX, int SY>
void where4(const uint8_t* m, const uint32_t* x, const uint32_t* y, uint32_t* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t k = 0u - uint32_t(m[i * SM] != 0);
    z[i] = (x[i * SX] & k) | (y[i * SY] & ~k);
  }
}

// where() moves elements of any dtype: it works on element bytes.
void run_where(const KernelCtx& c) {
  const TensorRef &cond = c.in[0], &a = c.in[1], &b = c.in[2];
  TensorRef& o = c.out[0];
  size_t es = dtype_size(o.dtype);
  const bool* pc = cond.as<bool>();
  const uint8_t* pm = reinterpret_cast<const uint8_t*>(pc);  // a mask byte's truth: != 0
  const char* pa = static_cast<const char*>(a.data);
  const char* pb = static_cast<const char*>(b.data);
  char* po = static_cast<char*>(o.data);
  BroadcastIter it(o.shape, {&cond, &a, &b});
  it.run([&](int64_t oo, const std::vector<int64_t>& offs, int64_t len, const std::vector<int64_t>& s) {
    if (es == 4 && s[0] <= 1 && s[1] <= 1 && s[2] <= 1) {
      const uint8_t* m = reinterpret_cast<const uint8_t*>(pc + offs[0]);
      const uint32_t* x = reinterpret_cast<const uint32_t*>(pa) + offs[1];
      const uint32_t* y = reinterpret_cast<const uint32_t*>(pb) + offs[2];
      uint32_t* z = reinterpret_cast<uint32_t*>(po) + oo;
      switch (s[0] * 4 + s[1] * 2 + s[2]) {
        case 0: where4<0, 0, 0>(m, x, y, z, len); break;
        case 1: where4<0, 0, 1>(m, x, y, z, len); break;
        case 2: where4<0, 1, 0>(m, x, y, z, len); break;
        case 3: where4<0, 1, 1>(m, x, y, z, len); break;
        case 4: where4<1, 0, 0>(m, x, y, z, len); break;
        case 5: where4<1, 0, 1>(m, x, y, z, len); break;
        case 6: where4<1, 1, 0>(m, x, y, z, len); break;
        default: where4<1, 1, 1>(m, x, y, z, len); break;
      }
      return;
    }
    for (int64_t i = 0; i < len; ++i) {
      const char* src = pm[offs[0] + i * s[0]] ? pa + size_t(offs[1] + i * s[1]) * es : pb + size_t(offs[2] + i * s[2]) * es;
      std::memcpy(po + size_t(oo + i) * es, src, es);
    }
  });
}


// ---- fused: a chain of float32 elementwise ops in one pass (fuse_elementwise) ----
// `program` holds 4 ints per step: op, x, y (register numbers; y = -1 for unary ops),
// flag (gelu's approximate). Registers 0..n_in-1 are the inputs, broadcast to the
// output's shape; step k writes register n_in + k; the last step is the output. The
// output is walked in tiles of kTile elements: each step runs over a tile held in L1,
// so intermediates never go to memory. Every step computes with the same functions
// as the op's own kernel, so fused and unfused results are identical.
namespace {
constexpr int64_t kTile = 256;

struct FusedProgram {
  struct Step {
    Op op;
    int x, y;
    int64_t flag;
    float pow_exp;  // pow with a one-element exponent input: its value, else NaN
  };
  std::vector<Step> steps;
  int n_in = 0;
};

// One loop per op, each its own function with the op's math inlined into it (flatten):
// inside run_step's one big switch the inliner gives up and calls vexp per element.
template <typename F>
__attribute__((flatten)) void map1(F f, const float* a, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
}
template <typename F>
__attribute__((flatten)) void map2(F f, const float* a, const float* b, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i], b[i]);
}

void run_step(const FusedProgram::Step& st, const float* a, const float* b, float* d, int64_t n) {
  auto un = [&](auto f) { map1(f, a, d, n); };
  auto bin = [&](auto f) { map2(f, a, b, d, n); };
  switch (st.op) {
#define UNARY_CASE(name, expr) \
  case Op::name: un([](float x) { return name##_f(x); }); return;
    ZENITH_FLOAT_UNARY(UNARY_CASE)
#undef UNARY_CASE
#define BINARY_CASE(name, expr) \
  case Op::name: bin([](float a, float b) { return name##_f(a, b); }); return;
    ZENITH_FLOAT_BINARY(BINARY_CASE)
#undef BINARY_CASE
    case Op::neg: un([](float x) { return neg_f(x); }); return;
    case Op::abs: un([](float x) { return abs_f(x); }); return;
    case Op::relu: un([](float x) { return relu_f(x); }); return;
    case Op::gelu:
      if (st.flag) un([](float x) { return gelu_tanh(x); });
      else gelu_exact_n(a, d, n);
      return;
    case Op::pow: with_pow_f(st.pow_exp, bin); return;
    default: fail("fused: ", op_info(st.op).name, " is not a fusable elementwise op");
  }
}
}  // namespace

// The program decoded and checked once per plan; only a scalar pow exponent, which is
// input data, is read per call.
void prepare_fused(const PrepareCtx& c, PreparedOp* p) {
  auto prog = std::make_shared<FusedProgram>();
  prog->n_in = int(c.in.size());
  const std::vector<int64_t>& code = c.a<attrs::fused>().program;
  ZENITH_CHECK(!code.empty() && code.size() % 4 == 0, "fused: malformed program");
  for (size_t k = 0; k < code.size(); k += 4) {
    FusedProgram::Step st{Op(code[k]), int(code[k + 1]), int(code[k + 2]), code[k + 3], NAN};
    int reg = prog->n_in + int(k / 4);
    ZENITH_CHECK(code[k] >= 0 && code[k] < kNumOps && st.x >= 0 && st.x < reg && st.y < reg,
                 "fused: malformed program step ", k / 4);
    prog->steps.push_back(st);
  }
  p->state = std::move(prog);
}

void run_fused(const KernelCtx& c) {
  TensorRef& o = c.out[0];
  int64_t numel = o.numel();
  if (numel == 0) return;
  FusedProgram prog = c.st<FusedProgram>();
  for (auto& st : prog.steps)
    if (st.op == Op::pow && st.y >= 0 && st.y < prog.n_in && c.in[size_t(st.y)].numel() == 1)
      st.pow_exp = *c.in[size_t(st.y)].as<float>();
  int n_in = prog.n_in, n_reg = n_in + int(prog.steps.size());
  std::vector<const TensorRef*> ins;
  for (const TensorRef& t : c.in) ins.push_back(&t);
  BroadcastIter it(o.shape, ins);  // only its per-input strides over the output
  float* po = o.as<float>();
  std::vector<const float*> in_base;
  for (const TensorRef& t : c.in) in_base.push_back(t.as<float>());
  // One span of `len` output elements: input k starts at in[k] + off[k] with stride s[k].
  // reg: n_reg pointers, scratch: n_reg tiles, both the calling thread's.
  auto span = [&](const float* const* in, const int64_t* off, const int64_t* s, int64_t len, float* out,
                  float* scratch, const float** reg) {
    for (int64_t t0 = 0; t0 < len; t0 += kTile) {
      int64_t n = std::min(kTile, len - t0);
      for (int k = 0; k < n_in; ++k) {
        const float* src = in[k] + off[k] + t0 * s[k];
        if (s[k] == 1) {
          reg[k] = src;
          continue;
        }
        float* buf = scratch + int64_t(k) * kTile;
        if (s[k] == 0) std::fill_n(buf, n, *src);
        else
          for (int64_t i = 0; i < n; ++i) buf[i] = src[i * s[k]];
        reg[k] = buf;
      }
      for (size_t j = 0; j < prog.steps.size(); ++j) {
        const auto& st = prog.steps[j];
        bool last = j + 1 == prog.steps.size();
        float* d = last ? out + t0 : scratch + int64_t(n_in + int(j)) * kTile;
        run_step(st, reg[st.x], st.y >= 0 ? reg[st.y] : nullptr, d, n);
        reg[size_t(n_in) + j] = d;
      }
    }
  };
  thread_local std::vector<float> scratch_buf;
  bool flat = true;  // every input full-size or a single element: one span over all elements
  for (const TensorRef& t : c.in) flat = flat && (t.numel() == numel || t.numel() == 1);
  if (flat) {
    parallel_for(numel, kElemChunk / 4, [&](int64_t lo, int64_t hi) {
      scratch_buf.resize(size_t(n_reg) * kTile);
      std::vector<const float*> reg(static_cast<size_t>(n_reg));
      std::vector<int64_t> off(static_cast<size_t>(n_in)), s(static_cast<size_t>(n_in));
      for (int k = 0; k < n_in; ++k) {
        bool full = c.in[size_t(k)].numel() == numel && numel != 1;
        off[size_t(k)] = full ? lo : 0;
        s[size_t(k)] = full ? 1 : 0;
      }
      span(in_base.data(), off.data(), s.data(), hi - lo, po + lo, scratch_buf.data(), reg.data());
    });
    return;
  }
  int64_t inner = it.inner(), rows = numel / inner;
  if (inner >= kTile) {
    // Broadcasting inputs over long rows: each row a span, each input's run read in place.
    parallel_for(rows, std::max<int64_t>(1, kElemChunk / 4 / inner), [&](int64_t lo, int64_t hi) {
      scratch_buf.resize(size_t(n_reg) * kTile);
      std::vector<const float*> reg(static_cast<size_t>(n_reg));
      std::vector<int64_t> off(static_cast<size_t>(n_in)), s(static_cast<size_t>(n_in)), idx;
      for (int k = 0; k < n_in; ++k) s[size_t(k)] = it.strides[size_t(k)].back();
      it.row_offsets(lo, off, idx);
      for (int64_t row = lo; row < hi; ++row) {
        span(in_base.data(), off.data(), s.data(), inner, po + row * inner, scratch_buf.data(), reg.data());
        it.next_row(off, idx);
      }
    });
    return;
  }
  // Short rows (a per-channel statistic over a 7x7 map): the output walked in tiles of kTile
  // across rows, each broadcast input gathered into its tile row by row, so the steps run
  // over whole tiles instead of one short row at a time.
  int r = it.rank();
  int64_t outer_n = r >= 2 ? it.shape[size_t(r - 2)] : 1;
  // Input k's values at output elements [t0, t0 + n) into dst: rows step by the input's
  // stride over the next dim out, the full offset recomputed only where that dim wraps.
  auto gather = [&](int k, int64_t t0, int64_t n, float* dst) {
    const float* src = c.in[size_t(k)].as<float>();
    const std::vector<int64_t>& st = it.strides[size_t(k)];
    int64_t si = st.back(), so = r >= 2 ? st[size_t(r - 2)] : 0;
    int64_t row = t0 / inner, i = t0 % inner, j = row % outer_n, off = 0;
    auto locate = [&] {
      off = 0;
      for (int64_t d = r - 2, q = row; d >= 0; --d) {
        off += (q % it.shape[size_t(d)]) * st[size_t(d)];
        q /= it.shape[size_t(d)];
      }
    };
    locate();
    for (int64_t done = 0; done < n;) {
      int64_t m = std::min(inner - i, n - done);
      const float* p = src + off + i * si;
      if (si == 0) std::fill_n(dst + done, m, *p);
      else std::copy_n(p, m, dst + done);  // si == 1: inputs are contiguous
      done += m;
      i = 0;
      ++row;
      if (++j == outer_n) {
        j = 0;
        locate();
      } else {
        off += so;
      }
    }
  };
  parallel_for(numel, kElemChunk / 4, [&](int64_t lo, int64_t hi) {
    scratch_buf.resize(size_t(2 * n_reg) * kTile);
    float* gathered = scratch_buf.data() + size_t(n_reg) * kTile;  // the inputs' tiles
    std::vector<const float*> reg(static_cast<size_t>(n_reg)), base(static_cast<size_t>(n_in));
    std::vector<int64_t> zero(static_cast<size_t>(n_in), 0), one(static_cast<size_t>(n_in), 1);
    for (int64_t t0 = lo; t0 < hi; t0 += kTile) {
      int64_t n = std::min(kTile, hi - t0);
      for (int k = 0; k < n_in; ++k) {
        const TensorRef& t = c.in[size_t(k)];
        if (t.numel() == numel) {
          base[size_t(k)] = t.as<float>() + t0;  // read in place: the output's layout
        } else {
          float* dst = gathered + int64_t(k) * kTile;
          gather(k, t0, n, dst);
          base[size_t(k)] = dst;
        }
      }
      span(base.data(), zero.data(), one.data(), n, po + t0, scratch_buf.data(), reg.data());
    }
  });
}

}  // namespace zenith
