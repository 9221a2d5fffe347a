// Elementwise kernels: unary maps, broadcasting binary maps, where, cast.
// The loops are plain C++ over contiguous inner runs so the compiler vectorizes
// them; the op semantics are the scalar functors below, which double as the
// reference (the broadcast iterator is exercised against PyTorch in the op tests).
#include <cmath>
#include <cstring>

#include "zenith/error.h"
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/vmath.h"
#include "zenith/threadpool.h"

namespace zenith {
namespace {

// ---- broadcast iteration ----
// Walks the output in row-major order, calling body(out_offset, in_offsets..., inner_len,
// inner_strides...) once per contiguous inner run.
struct BroadcastIter {
  std::vector<int64_t> shape;                 // output shape
  std::vector<std::vector<int64_t>> strides;  // per input, in elements (0 where broadcast)

  BroadcastIter(const std::vector<int64_t>& out_shape, const std::vector<const TensorRef*>& ins) : shape(out_shape) {
    int r = int(shape.size());
    for (const TensorRef* t : ins) {
      std::vector<int64_t> s(size_t(r), 0);
      std::vector<int64_t> cs = contiguous_strides(t->shape);
      int off = r - t->rank();
      for (int d = 0; d < t->rank(); ++d) s[size_t(off + d)] = t->shape[size_t(d)] == 1 ? 0 : cs[size_t(d)];
      strides.push_back(std::move(s));
    }
  }

  template <typename F>
  void run(F&& body) const {
    int r = int(shape.size());
    size_t n_in = strides.size();
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (numel == 0) return;
    std::vector<int64_t> offs(n_in, 0);
    if (r == 0) {
      std::vector<int64_t> inner(n_in, 0);
      body(int64_t(0), offs, int64_t(1), inner);
      return;
    }
    int64_t inner = shape[size_t(r - 1)];
    std::vector<int64_t> inner_s(n_in);
    for (size_t k = 0; k < n_in; ++k) inner_s[k] = strides[k][size_t(r - 1)];
    std::vector<int64_t> idx(size_t(r), 0);
    for (int64_t o = 0; o < numel; o += inner) {
      body(o, offs, inner, inner_s);
      for (int d = r - 2; d >= 0; --d) {
        size_t du = size_t(d);
        ++idx[du];
        for (size_t k = 0; k < n_in; ++k) offs[k] += strides[k][du];
        if (idx[du] < shape[du]) break;
        for (size_t k = 0; k < n_in; ++k) offs[k] -= strides[k][du] * shape[du];
        idx[du] = 0;
      }
    }
  }
};

constexpr int64_t kElemChunk = 1 << 14;  // elements per thread chunk, below which loops stay serial

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

template <typename T> T floordiv_int(T a, T b) {
  if (b == 0) fail("div: integer division by zero");
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

float gelu_exact(float x) { return 0.5f * x * (1.0f + verf(x * 0.70710678118654752f)); }
float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + vtanh(k * (x + 0.044715f * x * x * x)));
}

}  // namespace

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = int(shape.size()) - 2; d >= 0; --d) s[size_t(d)] = s[size_t(d + 1)] * shape[size_t(d + 1)];
  return s;
}

// ---- unary float ops ----
#define FLOAT_UNARY(name, expr)                                      \
  void run_##name(const KernelCtx& c) {                              \
    unary_map<float>(c.in[0], c.out[0], [](float x) { return expr; }); \
  }
FLOAT_UNARY(exp, vexp(x))
FLOAT_UNARY(log, std::log(x))
FLOAT_UNARY(log1p, std::log1p(x))
FLOAT_UNARY(expm1, std::expm1(x))
FLOAT_UNARY(sqrt, std::sqrt(x))
FLOAT_UNARY(rsqrt, 1.0f / std::sqrt(x))
FLOAT_UNARY(reciprocal, 1.0f / x)
FLOAT_UNARY(sin, std::sin(x))
FLOAT_UNARY(cos, std::cos(x))
FLOAT_UNARY(tanh, vtanh(x))
FLOAT_UNARY(erf, verf(x))
FLOAT_UNARY(sigmoid, vsigmoid(x))
FLOAT_UNARY(silu, x * vsigmoid(x))
FLOAT_UNARY(hardswish, x * std::fmin(std::fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f)
FLOAT_UNARY(hardsigmoid, std::fmin(std::fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f)
#undef FLOAT_UNARY

void apply_activation(float* data, int64_t n, Activation act) {
  auto map = [&](auto f) {
    parallel_for(n, kElemChunk, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) data[i] = f(data[i]);
    });
  };
  switch (act) {
    case Activation::kNone: return;
    case Activation::kRelu: map([](float x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0f); }); return;
    case Activation::kGelu: map([](float x) { return gelu_exact(x); }); return;
    case Activation::kGeluTanh: map([](float x) { return gelu_tanh(x); }); return;
    case Activation::kSilu: map([](float x) { return x * vsigmoid(x); }); return;
    case Activation::kTanh: map([](float x) { return vtanh(x); }); return;
  }
  fail("unknown activation code ", int64_t(act));
}

void run_gelu(const KernelCtx& c) {
  // Lambdas, not function pointers, so the maps inline and vectorize.
  if (c.node.i("approximate", 0)) unary_map<float>(c.in[0], c.out[0], [](float x) { return gelu_tanh(x); });
  else unary_map<float>(c.in[0], c.out[0], [](float x) { return gelu_exact(x); });
}

// ---- unary numeric ops (float and integer) ----
void run_neg(const KernelCtx& c) {
  dispatch_numeric(c.in[0].dtype, "neg", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) unary_map<T>(c.in[0], c.out[0], [](T x) { return T(-x); });
  });
}
void run_abs(const KernelCtx& c) {
  dispatch_numeric(c.in[0].dtype, "abs", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) unary_map<T>(c.in[0], c.out[0], [](T x) { return x < 0 ? T(-x) : x; });
  });
}
void run_relu(const KernelCtx& c) {
  dispatch_numeric(c.in[0].dtype, "relu", [&](auto t) {
    using T = decltype(t);
    // x > 0 ? x : 0 keeps NaN as NaN only if written this way round for floats.
    if constexpr (std::is_same_v<T, float>)
      unary_map<T>(c.in[0], c.out[0], [](T x) { return std::isnan(x) ? x : (x > 0 ? x : T(0)); });
    else if constexpr (!std::is_same_v<T, bool>)
      unary_map<T>(c.in[0], c.out[0], [](T x) { return x > 0 ? x : T(0); });
  });
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
  bool has_lo = c.node.has("min"), has_hi = c.node.has("max");
  double lo = c.node.f("min", 0), hi = c.node.f("max", 0);
  dispatch_numeric(c.in[0].dtype, "clamp", [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) {
      T l = T(lo), h = T(hi);
      unary_map<T>(c.in[0], c.out[0], [=](T x) {
        if constexpr (std::is_same_v<T, float>)
          if (std::isnan(x)) return x;
        if (has_lo && x < l) x = l;
        if (has_hi && x > h) x = h;
        return x;
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
  bool si = sd == DType::i64 || sd == DType::i32 || sd == DType::b8;
  bool di = dd == DType::i64 || dd == DType::i32 || dd == DType::b8;
  if (si && di) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = sd == DType::i64 ? static_cast<const int64_t*>(src)[i]
                : sd == DType::i32 ? static_cast<const int32_t*>(src)[i]
                                   : int64_t(static_cast<const bool*>(src)[i]);
      if (dd == DType::i64) static_cast<int64_t*>(dst)[i] = v;
      else if (dd == DType::i32) static_cast<int32_t*>(dst)[i] = int32_t(v);
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
ARITH(add, a + b, a + b)
ARITH(sub, a - b, a - b)
ARITH(mul, a * b, a * b)
ARITH(maximum, (std::isnan(a) || std::isnan(b)) ? NAN : (a > b ? a : b), a > b ? a : b)
ARITH(minimum, (std::isnan(a) || std::isnan(b)) ? NAN : (a < b ? a : b), a < b ? a : b)
#undef ARITH

void run_div(const KernelCtx& c) {
  int64_t mode = c.node.i("rounding", 0);
  dispatch_numeric(c.in[0].dtype, "div", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (mode == 0) binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return a / b; });
      else if (mode == 1) binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return std::floor(a / b); });
      else binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return std::trunc(a / b); });
    } else if constexpr (!std::is_same_v<T, bool>) {
      ZENITH_CHECK(mode != 0, "div: true division of integers needs float inputs");
      if (mode == 1) binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return floordiv_int(a, b); });
      else
        binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) {
          if (b == 0) fail("div: integer division by zero");
          return T(a / b);
        });
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
      float e = c.in[1].numel() == 1 ? *c.in[1].as<float>() : NAN;
      auto map = [&](auto f) { binary_map<T, T>(c.in[0], c.in[1], c.out[0], f); };
      if (e == 2.0f) map([](T a, T) { return a * a; });
      else if (e == 3.0f) map([](T a, T) { return a * a * a; });
      else if (e == 0.5f) map([](T a, T) { return std::sqrt(a); });
      else if (e == -0.5f) map([](T a, T) { return 1.0f / std::sqrt(a); });
      else if (e == -1.0f) map([](T a, T) { return 1.0f / a; });
      else if (e == -2.0f) map([](T a, T) { return 1.0f / (a * a); });
      else
        map([](T a, T b) {
          if (b == 2.0f) return a * a;
          if (b == 0.5f) return std::sqrt(a);
          return std::pow(a, b);
        });
    } else if constexpr (!std::is_same_v<T, bool>) {
      binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) {
        T r = 1;
        if (b < 0) return T(a == 1 ? 1 : (a == -1 ? ((-b) % 2 ? -1 : 1) : 0));
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
      binary_map<T, T>(c.in[0], c.in[1], c.out[0], [](T a, T b) { return T(a - floordiv_int(a, b) * b); });
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

// where() moves elements of any dtype: it works on element bytes.
void run_where(const KernelCtx& c) {
  const TensorRef &cond = c.in[0], &a = c.in[1], &b = c.in[2];
  TensorRef& o = c.out[0];
  size_t es = dtype_size(o.dtype);
  const bool* pc = cond.as<bool>();
  const char* pa = static_cast<const char*>(a.data);
  const char* pb = static_cast<const char*>(b.data);
  char* po = static_cast<char*>(o.data);
  BroadcastIter it(o.shape, {&cond, &a, &b});
  it.run([&](int64_t oo, const std::vector<int64_t>& offs, int64_t len, const std::vector<int64_t>& s) {
    if (es == 4) {
      const float* x = reinterpret_cast<const float*>(pa) + offs[1];
      const float* y = reinterpret_cast<const float*>(pb) + offs[2];
      float* z = reinterpret_cast<float*>(po) + oo;
      const bool* m = pc + offs[0];
      for (int64_t i = 0; i < len; ++i) z[i] = m[i * s[0]] ? x[i * s[1]] : y[i * s[2]];
      return;
    }
    for (int64_t i = 0; i < len; ++i) {
      const char* src = pc[offs[0] + i * s[0]] ? pa + size_t(offs[1] + i * s[1]) * es : pb + size_t(offs[2] + i * s[2]) * es;
      std::memcpy(po + size_t(oo + i) * es, src, es);
    }
  });
}

}  // namespace zenith
