// The op table and each op's shape/dtype inference. Inference works on symbolic
// dims (compile time) and on constant dims (the runtime, after binding symbols).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "zenith/attrs.h"
#include "zenith/error.h"
#include "zenith/ir.h"

namespace zenith {
namespace {

using Types = std::vector<TensorType>;

const TensorType& in(const Graph& g, const Node& n, size_t i) { return g.type(n.inputs.at(i)); }

int64_t norm_dim(int64_t d, int rank, const char* op) {
  int r = std::max(rank, 1);
  ZENITH_CHECK(d >= -r && d < r, op, ": dim ", d, " out of range for rank ", rank);
  return d < 0 ? d + r : d;
}

SymInt sym_mul(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return a.value() * b.value();
  if (a.is_const() && a.value() == 1) return b;
  if (b.is_const() && b.value() == 1) return a;
  auto e = std::make_shared<SymExpr>();
  e->kind = SymExpr::kMul;
  auto wrap = [](const SymInt& s) -> SymExprPtr {
    if (!s.is_const()) return s.expr();
    auto c = std::make_shared<SymExpr>();
    c->value = s.value();
    return c;
  };
  e->a = wrap(a);
  e->b = wrap(b);
  return SymInt(SymExprPtr(e));
}

SymInt sym_add_const(const SymInt& a, int64_t c) {
  if (a.is_const()) return a.value() + c;
  if (c == 0) return a;
  auto e = std::make_shared<SymExpr>();
  e->kind = SymExpr::kAdd;
  e->a = a.expr();
  auto k = std::make_shared<SymExpr>();
  k->value = c;
  e->b = k;
  return SymInt(SymExprPtr(e));
}

Types same_as_input(const Graph& g, const Node& n) { return {in(g, n, 0)}; }

Types unary_float(const Graph& g, const Node& n) {
  const auto& t = in(g, n, 0);
  ZENITH_CHECK(is_float(t.dtype), op_info(n.op).name, ": needs a floating input, got ", dtype_name(t.dtype));
  return {t};
}

Types unary_numeric(const Graph& g, const Node& n) {
  const auto& t = in(g, n, 0);
  ZENITH_CHECK(t.dtype != DType::b8, op_info(n.op).name, ": bool input not supported");
  return {t};
}

Types bool_unary(const Graph& g, const Node& n) {
  TensorType t = in(g, n, 0);
  if (n.op == Op::logical_not) {
    t.dtype = DType::b8;
  } else {  // isnan
    t.dtype = DType::b8;
  }
  return {t};
}

DType dtype_attr(const Node& n) {
  int64_t d = n.i("dtype");
  ZENITH_CHECK(d >= 0 && d < kNumDTypes, op_info(n.op).name, ": dtype code ", d, " names no dtype");
  return DType(d);
}

Types infer_cast(const Graph& g, const Node& n) {
  TensorType t = in(g, n, 0);
  t.dtype = dtype_attr(n);
  return {t};
}

Types binary(const Graph& g, const Node& n, bool to_bool) {
  const auto& a = in(g, n, 0);
  const auto& b = in(g, n, 1);
  const char* name = op_info(n.op).name;
  ZENITH_CHECK(a.dtype == b.dtype, name, ": input dtypes differ (", dtype_name(a.dtype), " vs ",
               dtype_name(b.dtype), "); the importer inserts casts");
  TensorType t;
  t.dtype = to_bool ? DType::b8 : a.dtype;
  t.shape = broadcast_shapes(a.shape, b.shape, name);
  return {t};
}
Types binary_arith(const Graph& g, const Node& n) {
  ZENITH_CHECK(in(g, n, 0).dtype != DType::b8 || n.op == Op::maximum || n.op == Op::minimum ||
                   n.op == Op::mul || n.op == Op::add,
               op_info(n.op).name, ": bool inputs not supported");
  return binary(g, n, false);
}
Types binary_cmp(const Graph& g, const Node& n) { return binary(g, n, true); }
Types binary_logical(const Graph& g, const Node& n) {
  ZENITH_CHECK(in(g, n, 0).dtype == DType::b8 && in(g, n, 1).dtype == DType::b8, op_info(n.op).name,
               ": needs bool inputs");
  return binary(g, n, true);
}

// A fused chain's output: its inputs broadcast together (every step has the chain's
// shape), float32.
Types infer_fused(const Graph& g, const Node& n) {
  ZENITH_CHECK(!n.inputs.empty(), "fused: needs inputs");
  ZENITH_CHECK(n.has("program") && n.ints("program").size() % 4 == 0 && !n.ints("program").empty(),
               "fused: needs a program of 4 ints per step");
  TensorType t;
  t.dtype = DType::f32;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    ZENITH_CHECK(in(g, n, k).dtype == DType::f32, "fused: inputs must be float32");
    t.shape = k == 0 ? in(g, n, 0).shape : broadcast_shapes(t.shape, in(g, n, k).shape, "fused");
  }
  return {t};
}

Types infer_where(const Graph& g, const Node& n) {
  const auto& c = in(g, n, 0);
  const auto& a = in(g, n, 1);
  const auto& b = in(g, n, 2);
  ZENITH_CHECK(c.dtype == DType::b8, "where: condition must be bool, got ", dtype_name(c.dtype));
  ZENITH_CHECK(a.dtype == b.dtype, "where: branch dtypes differ");
  TensorType t;
  t.dtype = a.dtype;
  t.shape = broadcast_shapes(broadcast_shapes(c.shape, a.shape, "where"), b.shape, "where");
  return {t};
}

std::vector<bool> reduced_mask(const Node& n, int rank, const char* op) {
  std::vector<bool> m(size_t(rank), false);
  auto dims = n.const_ints("dims");
  if (dims.empty())
    std::fill(m.begin(), m.end(), true);  // torch: an empty dim list reduces everything
  for (int64_t d : dims) {
    int64_t k = norm_dim(d, rank, op);
    if (rank == 0) continue;  // a 0-d tensor takes dim 0 or -1 (as in torch) and has no dim to reduce
    ZENITH_CHECK(!m[size_t(k)], op, ": dim ", d, " appears more than once in dims");
    m[size_t(k)] = true;
  }
  return m;
}

Types infer_reduce(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const char* name = op_info(n.op).name;
  auto m = reduced_mask(n, x.rank(), name);
  bool keep = n.i("keepdim", 0) != 0;
  TensorType t;
  t.dtype = x.dtype;
  if (n.op == Op::reduce_mean) ZENITH_CHECK(is_float(x.dtype), "reduce_mean: needs a floating input");
  if (n.op == Op::reduce_sum && x.dtype == DType::b8) t.dtype = DType::i64;
  for (int d = 0; d < x.rank(); ++d) {
    if (!m[size_t(d)]) t.shape.push_back(x.shape[size_t(d)]);
    else if (keep) t.shape.push_back(1);
  }
  return {t};
}

Types infer_argmax(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  TensorType t;
  t.dtype = DType::i64;
  bool keep = n.i("keepdim", 0) != 0;
  if (!n.has("dim")) {  // over the flattened tensor
    if (keep) t.shape.assign(size_t(x.rank()), SymInt(1));
    return {t};
  }
  int64_t d = norm_dim(n.i("dim"), x.rank(), "argmax");
  for (int i = 0; i < x.rank(); ++i) {
    if (i != d) t.shape.push_back(x.shape[size_t(i)]);
    else if (keep) t.shape.push_back(1);
  }
  return {t};
}

Types infer_dim_op(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  norm_dim(n.i("dim"), x.rank(), op_info(n.op).name);
  if (n.op == Op::softmax || n.op == Op::log_softmax)
    ZENITH_CHECK(is_float(x.dtype), op_info(n.op).name, ": needs a floating input");
  return {x};
}

bool dims_match(const SymInt& a, const SymInt& b);

Types infer_norm(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  if (n.op == Op::layer_norm) {
    ZENITH_CHECK(n.inputs.size() == 3 || n.inputs.size() == 4, "layer_norm: takes (x, weight, bias[, residual]), got ",
                 n.inputs.size(), " inputs");
    if (n.inputs.size() == 4) {
      const auto& r = in(g, n, 3);
      bool same = r.dtype == x.dtype && r.rank() == x.rank();
      for (int d = 0; same && d < x.rank(); ++d) same = dims_match(r.shape[size_t(d)], x.shape[size_t(d)]);
      ZENITH_CHECK(same, "layer_norm: the residual must have x's shape and dtype");
    }
  }
  int64_t k = n.i("normalized_ndim");
  ZENITH_CHECK(k >= 1 && k <= x.rank(), op_info(n.op).name, ": normalized_ndim ", k, " for rank ", x.rank());
  ZENITH_CHECK(is_float(x.dtype), op_info(n.op).name, ": needs a floating input");
  for (size_t i = 1; i < (n.op == Op::layer_norm ? 3u : 2u); ++i) {  // weight, bias: the normalized shape
    const auto& p = in(g, n, i);
    bool ok = is_float(p.dtype) && p.rank() == k;
    for (int64_t d = 0; ok && d < k; ++d) ok = dims_match(p.shape[size_t(d)], x.shape[size_t(x.rank() - k + d)]);
    ZENITH_CHECK(ok, op_info(n.op).name, ": input ", i, " must be floating with the last ", k, " dims of x");
  }
  return {x};
}

Types infer_batch_norm(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  ZENITH_CHECK(x.rank() >= 2, "batch_norm: input rank ", x.rank(), " < 2");
  ZENITH_CHECK(is_float(x.dtype), "batch_norm: needs a floating input");
  for (size_t i = 1; i < 5; ++i) {  // weight, bias, mean, var: one value per channel
    const auto& p = in(g, n, i);
    ZENITH_CHECK(is_float(p.dtype) && p.rank() == 1 && dims_match(p.shape[0], x.shape[1]), "batch_norm: input ", i,
                 " must be floating with one value per channel");
  }
  return {x};
}

bool dims_match(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return a.value() == b.value();
  return true;  // symbolic: PyTorch's guards established equality
}

Types infer_matmul(const Graph& g, const Node& n) {
  const auto& a = in(g, n, 0);
  const auto& b = in(g, n, 1);
  ZENITH_CHECK(a.rank() >= 2 && b.rank() >= 2, "matmul: inputs need rank >= 2, got ", a.rank(), " and ",
               b.rank());
  ZENITH_CHECK(a.dtype == b.dtype && is_float(a.dtype), "matmul: needs equal floating dtypes");
  bool ta = n.i("trans_a", 0) != 0, tb = n.i("trans_b", 0) != 0;
  const SymInt& ka = a.shape[size_t(a.rank() - (ta ? 2 : 1))];
  const SymInt& kb = b.shape[size_t(b.rank() - (tb ? 1 : 2))];
  ZENITH_CHECK(dims_match(ka, kb), "matmul: inner dims differ (", ka.str(g.symbols), " vs ", kb.str(g.symbols), ")");
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  TensorType t;
  t.dtype = a.dtype;
  t.shape = broadcast_shapes(ba, bb, "matmul");
  t.shape.push_back(a.shape[size_t(a.rank() - (ta ? 1 : 2))]);
  t.shape.push_back(b.shape[size_t(b.rank() - (tb ? 2 : 1))]);
  return {t};
}

Types infer_addmm(const Graph& g, const Node& n) {
  const auto& a = in(g, n, 1);
  const auto& b = in(g, n, 2);
  ZENITH_CHECK(a.rank() == 2 && b.rank() == 2, "addmm: needs 2-D operands");
  ZENITH_CHECK(a.dtype == b.dtype && in(g, n, 0).dtype == a.dtype && is_float(a.dtype),
               "addmm: needs bias and operands of one floating dtype");
  ZENITH_CHECK(in(g, n, 0).rank() <= 2, "addmm: bias rank ", in(g, n, 0).rank(), " > 2");
  bool ta = n.i("trans_a", 0) != 0, tb = n.i("trans_b", 0) != 0;
  ZENITH_CHECK(dims_match(a.shape[ta ? 0 : 1], b.shape[tb ? 1 : 0]), "addmm: inner dims differ");
  TensorType t;
  t.dtype = a.dtype;
  t.shape = {a.shape[ta ? 1 : 0], b.shape[tb ? 0 : 1]};
  broadcast_shapes(in(g, n, 0).shape, t.shape, "addmm");  // the bias broadcasts to [M, N] either way
  if (n.i("trans_c", 0)) std::swap(t.shape[0], t.shape[1]);
  return {t};
}

Types infer_addmm_parts(const Graph& g, const Node& n) {
  const int64_t P = n.i("parts");
  ZENITH_CHECK(P >= 1, "addmm_parts: parts must be at least 1, got ", P);
  ZENITH_CHECK(int64_t(n.inputs.size()) == 1 + P || int64_t(n.inputs.size()) == 1 + 2 * P,
               "addmm_parts: takes (x, w_1..w_P[, bias_1..bias_P]), got ", n.inputs.size(), " inputs for ", P,
               " part(s)");
  const auto& x = in(g, n, 0);
  ZENITH_CHECK(x.dtype == DType::f32 && x.rank() == 2, "addmm_parts: x must be f32 [M, K], got ", dtype_name(x.dtype),
               " of rank ", x.rank());
  const bool has_bias = int64_t(n.inputs.size()) == 1 + 2 * P;
  Types out;
  for (int64_t i = 0; i < P; ++i) {
    const auto& w = in(g, n, int(1 + i));
    ZENITH_CHECK(w.dtype == DType::f32 && w.rank() == 2 && dims_match(w.shape[1], x.shape[1]),
                 "addmm_parts: weight ", i, " must be f32 [N, ", x.shape[1].str(g.symbols), "]");
    if (has_bias) {
      const auto& b = in(g, n, int(1 + P + i));
      ZENITH_CHECK(b.dtype == DType::f32 && b.rank() == 1 && dims_match(b.shape[0], w.shape[0]),
                   "addmm_parts: bias ", i, " must be f32 [", w.shape[0].str(g.symbols), "]");
    }
    TensorType t;
    t.dtype = DType::f32;
    t.shape = {x.shape[0], w.shape[0]};
    out.push_back(t);
  }
  return out;
}

// A quantized weight: u8 [rows, row_bytes] with static row bytes that are a whole
// number of `format` blocks. Returns K, the values per row.
int64_t quant_weight_k(const Graph& g, const Node& n, const TensorType& w) {
  const char* op = op_info(n.op).name;
  QFormat f = QFormat(n.i("format"));
  ZENITH_CHECK(w.dtype == DType::u8 && w.rank() == 2, op, ": the weight must be u8 [rows, row_bytes], got ",
               dtype_name(w.dtype), " of rank ", w.rank());
  ZENITH_CHECK(w.shape[1].is_const(), op, ": the weight's row bytes must be static");
  int64_t rb = w.shape[1].value(), K = qformat_row_elems(f, rb);
  const QFormatInfo& q = qformat_info(f);
  if (K < 0) {
    if (q.block_elems == 0) fail(op, ": ", rb, " bytes per row is less than ", q.name, "'s ", q.block_bytes, "-byte scale");
    fail(op, ": ", rb, " bytes per row is not a whole number of ", q.name, " blocks (", q.block_bytes, " bytes each)");
  }
  return K;
}

Types infer_qmatmul(const Graph& g, const Node& n) {
  const int64_t P = n.i("parts", 1);
  ZENITH_CHECK(P >= 1, "qmatmul: parts must be at least 1, got ", P);
  const bool has_mul = n.has("x_mul") && n.i("x_mul");
  const int64_t n_in = int64_t(n.inputs.size()) - (has_mul ? 1 : 0);
  ZENITH_CHECK(n_in == 1 + P || n_in == 1 + 2 * P, "qmatmul: takes (x, ",
               P == 1 ? "w[, bias]" : "w_1..w_P[, bias_1..bias_P]", has_mul ? ", x_mul" : "", "), got ",
               n.inputs.size(), " inputs for ", P, " part(s)");
  const auto& x = in(g, n, 0);
  ZENITH_CHECK(x.dtype == DType::f32 && x.rank() >= 1, "qmatmul: x must be f32 [..., K], got ", dtype_name(x.dtype),
               " of rank ", x.rank());
  const QFormat f = QFormat(n.i("format"));
  ZENITH_CHECK(P == 1 || f == QFormat::int8, "qmatmul: parts need int8 weights, got ", qformat_info(f).name);
  const bool has_bias = n_in == 1 + 2 * P;
  if (has_mul) {
    const auto& m = in(g, n, int(n_in));
    ZENITH_CHECK(n.has("x_scale") && m.dtype == DType::f32 && m.rank() == 1 && dims_match(m.shape[0], x.shape.back()),
                 "qmatmul: x_mul needs static INT8 activations (x_scale) and f32 [", x.shape.back().str(g.symbols),
                 "], one value per channel of x");
  }
  Types out;
  for (int64_t i = 0; i < P; ++i) {
    const auto& w = in(g, n, int(1 + i));
    const int64_t K = quant_weight_k(g, n, w);
    const SymInt& xk = x.shape.back();
    ZENITH_CHECK(!xk.is_const() || xk.value() == K, "qmatmul: x has ", xk.str(g.symbols), " values per row, the ",
                 qformat_info(f).name, " weight ", K);
    if (P > 1)
      ZENITH_CHECK(w.shape[0].is_const() && w.shape[0].value() > 0 && w.shape[0].value() % 32 == 0 &&
                       w.shape[1].value() == in(g, n, 1).shape[1].value(),
                   "qmatmul: each part's weight needs static rows, a multiple of 32, and the first part's row bytes; "
                   "part ", i, " has ", w.shape[0].str(g.symbols), " x ", w.shape[1].str(g.symbols));
    if (has_bias) {
      const auto& b = in(g, n, int(1 + P + i));
      ZENITH_CHECK(b.dtype == DType::f32 && b.rank() == 1 && dims_match(b.shape[0], w.shape[0]),
                   "qmatmul: the bias must be f32 [", w.shape[0].str(g.symbols), "]");
    }
    TensorType t;
    t.dtype = DType::f32;
    t.shape.assign(x.shape.begin(), x.shape.end() - 1);
    t.shape.push_back(w.shape[0]);
    out.push_back(t);
  }
  if (n.has("x_scale")) {
    const double s = n.f("x_scale");
    ZENITH_CHECK(f == QFormat::int8 && s > 0 && s <= 3.4e38,
                 "qmatmul: x_scale needs int8 weights and a positive finite value, got ", s);
  }
  if (n.has("row_scale") && n.i("row_scale"))
    ZENITH_CHECK(f == QFormat::int8 && !n.has("x_scale"),
                 "qmatmul: row_scale (one activation scale per row) needs int8 weights and no x_scale");
  return out;
}

Types infer_qembedding(const Graph& g, const Node& n) {
  const auto& w = in(g, n, 0);
  const auto& ids = in(g, n, 1);
  int64_t K = quant_weight_k(g, n, w);
  ZENITH_CHECK(ids.dtype == DType::i64 || ids.dtype == DType::i32, "qembedding: ids must be i64 or i32, got ",
               dtype_name(ids.dtype));
  TensorType t;
  t.dtype = DType::f32;
  t.shape = ids.shape;
  t.shape.push_back(K);
  return {t};
}

// An attribute of two values (height, width), each at least `lo`.
std::vector<int64_t> pair_attr(const Node& n, const char* key, int64_t lo) {
  auto v = n.const_ints(key);
  const char* op = op_info(n.op).name;
  ZENITH_CHECK(v.size() == 1 || v.size() == 2, op, ": ", key, " needs 2 values (height, width) or one for both, got ",
               v.size());
  if (v.size() == 1) v.push_back(v[0]);
  for (int64_t x : v) ZENITH_CHECK(x >= lo, op, ": ", key, " ", x, " is below ", lo);
  return v;
}

// An int8 conv's static activation scale, when it has one.
void check_x_scale(const Node& n) {
  if (!n.has("x_scale")) return;
  const double s = n.f("x_scale");
  ZENITH_CHECK(usable_scale(float(s)), op_info(n.op).name, ": x_scale must be a positive finite number with a finite "
               "inverse, got ", s);
}

SymInt conv_out(const SymInt& i, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  ZENITH_CHECK(k >= 1 && s >= 1 && d >= 1 && p >= 0, "conv/pool: kernel ", k, ", stride ", s, ", dilation ", d,
               " must be positive and padding ", p, " not negative");
  if (!i.is_const()) {
    // (i + 2p - d(k-1) - 1) // s + 1 ; symbolic spatial dims are rare, keep the formula exact.
    SymInt num = sym_add_const(i, 2 * p - d * (k - 1) - 1);
    auto e = std::make_shared<SymExpr>();
    e->kind = SymExpr::kFloorDiv;
    e->a = num.expr();
    auto c = std::make_shared<SymExpr>();
    c->value = s;
    e->b = c;
    ZENITH_CHECK(!ceil_mode, "pooling: ceil_mode with a symbolic spatial dim is not supported");
    return sym_add_const(SymInt(SymExprPtr(e)), 1);
  }
  int64_t num = i.value() + 2 * p - d * (k - 1) - 1;
  ZENITH_CHECK(num >= 0, "conv/pool: the window (", d * (k - 1) + 1, ") is larger than the padded input (",
               i.value() + 2 * p, ")");
  int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (o - 1) * s >= i.value() + p) --o;  // last window must start inside the input
  return o;
}

Types infer_conv2d(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const auto& w = in(g, n, 1);
  const bool residual = n.i("has_residual", 0) != 0;
  const size_t plain = n.inputs.size() - (residual ? 1 : 0);  // inputs before the residual
  ZENITH_CHECK(plain == 3 || plain == 7,
               "conv2d: takes (x, w, bias) or (x, w, bias, bn_w, bn_b, bn_mean, bn_var), then the residual with "
               "has_residual; got ",
               n.inputs.size(), " inputs");
  const bool int8 = w.dtype == DType::u8;
  ZENITH_CHECK(x.rank() == 4 && w.rank() == (int8 ? 2 : 4),
               int8 ? "conv2d: an int8 weight is u8 rows [OC, 4 + C * KH * KW], with an NCHW input"
                    : "conv2d: needs NCHW input and OIHW weight");
  for (size_t k = 3; k < plain; ++k) {
    const auto& t = in(g, n, k);
    ZENITH_CHECK(t.rank() == 1 && t.shape[0].is_const() && t.shape[0].value() == w.shape[0].value() &&
                     t.dtype == x.dtype,
                 "conv2d: fused batch-norm input ", k, " must be [", w.shape[0].value(), "] of the input's dtype");
  }
  ZENITH_CHECK(plain == 3 || n.has("bn_eps"), "conv2d: fused batch-norm inputs without bn_eps");
  ZENITH_CHECK(w.is_static(), "conv2d: weight shape must be static");
  auto st = pair_attr(n, "stride", 1), pd = pair_attr(n, "padding", 0), dl = pair_attr(n, "dilation", 1);
  int64_t groups = n.i("groups", 1);
  ZENITH_CHECK(groups >= 1 && w.shape[0].value() % groups == 0, "conv2d: ", w.shape[0].value(),
               " output channels do not split into ", groups, " groups");
  std::vector<int64_t> kernel = n.has("kernel") ? pair_attr(n, "kernel", 1) : std::vector<int64_t>{0, 0};
  if (int8) {
    ZENITH_CHECK(groups == 1 && x.dtype == DType::f32 && kernel[0] > 0 && kernel[1] > 0 && x.shape[1].is_const() &&
                     x.shape[1].value() > 0 && w.shape[1].value() == 4 + x.shape[1].value() * kernel[0] * kernel[1],
                 "conv2d: an int8 weight needs one group, a float32 input and `kernel`, its rows 4 + C * KH * KW "
                 "bytes; got ", w.shape[1].value(), " bytes for ", x.shape[1].str(g.symbols), " channels and kernel ",
                 kernel[0], "x", kernel[1]);
    check_x_scale(n);
  } else {
    ZENITH_CHECK(!n.has("x_scale") && !n.has("kernel"), "conv2d: x_scale and kernel are for int8 weights");
    kernel = {w.shape[2].value(), w.shape[3].value()};
    ZENITH_CHECK(x.shape[1].is_const() && x.shape[1].value() == w.shape[1].value() * groups,
                 "conv2d: input channels ", x.shape[1].str(g.symbols), " != weight ", w.shape[1].value(),
                 " x groups ", groups);
  }
  if (n.i("has_bias", 0)) {
    const auto& b = in(g, n, 2);
    ZENITH_CHECK(b.rank() == 1 && b.shape[0].is_const() && b.shape[0].value() == w.shape[0].value() &&
                     b.dtype == x.dtype,
                 "conv2d: bias must be [", w.shape[0].value(), "] of the input's dtype");
  }
  ZENITH_CHECK(int8 || (w.dtype == x.dtype && is_float(x.dtype)),
               "conv2d: needs input and weight of one floating dtype");
  TensorType t;
  t.dtype = x.dtype;
  t.shape = {x.shape[0], w.shape[0], conv_out(x.shape[2], kernel[0], st[0], pd[0], dl[0], false),
             conv_out(x.shape[3], kernel[1], st[1], pd[1], dl[1], false)};
  if (residual) {
    const auto& r = in(g, n, n.inputs.size() - 1);
    bool same = r.dtype == DType::f32 && x.dtype == DType::f32 && r.rank() == 4;
    for (int d = 0; same && d < 4; ++d) same = r.shape[size_t(d)].same(t.shape[size_t(d)]);
    ZENITH_CHECK(same, "conv2d: the residual must be float32 with the output's shape");
  }
  return {t};
}

// A transposed convolution's output size along one dim: (i - 1) * s - 2p + d(k - 1) + op + 1.
SymInt conv_transpose_out(const SymInt& i, int64_t k, int64_t s, int64_t p, int64_t d, int64_t op) {
  ZENITH_CHECK(k >= 1 && s >= 1 && d >= 1 && p >= 0 && op >= 0 && op < std::max(s, d),
               "conv_transpose2d: kernel ", k, ", stride ", s, ", dilation ", d, " must be positive, padding ", p,
               " not negative and output_padding ", op, " below the stride or the dilation");
  const int64_t c = -2 * p + d * (k - 1) + op + 1;
  if (!i.is_const()) return sym_add_const(sym_mul(i, SymInt(s)), c - s);
  const int64_t o = (i.value() - 1) * s + c;
  ZENITH_CHECK(o >= 1, "conv_transpose2d: output size ", o, " is not positive (input ", i.value(), ")");
  return SymInt(o);
}

Types infer_conv_transpose2d(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const auto& w = in(g, n, 1);
  ZENITH_CHECK(x.rank() == 4 && w.rank() == 4,
               "conv_transpose2d: needs NCHW input and a weight [in, out / groups, KH, KW]");
  ZENITH_CHECK(w.is_static(), "conv_transpose2d: weight shape must be static");
  ZENITH_CHECK(is_float(x.dtype) && w.dtype == x.dtype, "conv_transpose2d: needs input and weight of one floating dtype");
  const auto st = pair_attr(n, "stride", 1), pd = pair_attr(n, "padding", 0), dl = pair_attr(n, "dilation", 1),
             op = pair_attr(n, "output_padding", 0);
  const int64_t groups = n.i("groups", 1), IC = w.shape[0].value(), OC = w.shape[1].value() * groups;
  ZENITH_CHECK(groups >= 1 && IC % groups == 0, "conv_transpose2d: ", IC, " input channels do not split into ",
               groups, " groups");
  ZENITH_CHECK(x.shape[1].is_const() && x.shape[1].value() == IC, "conv_transpose2d: input channels ",
               x.shape[1].str(g.symbols), " != the weight's ", IC);
  if (n.i("has_bias", 0)) {
    const auto& b = in(g, n, 2);
    ZENITH_CHECK(b.rank() == 1 && b.shape[0].is_const() && b.shape[0].value() == OC && b.dtype == x.dtype,
                 "conv_transpose2d: bias must be [", OC, "] of the input's dtype");
  }
  TensorType t;
  t.dtype = x.dtype;
  t.shape = {x.shape[0], SymInt(OC), conv_transpose_out(x.shape[2], w.shape[2].value(), st[0], pd[0], dl[0], op[0]),
             conv_transpose_out(x.shape[3], w.shape[3].value(), st[1], pd[1], dl[1], op[1])};
  return {t};
}

Types infer_conv2d_weight_grad(const Graph& g, const Node& n) {
  const auto& gy = in(g, n, 0);
  const auto& x = in(g, n, 1);
  ZENITH_CHECK(gy.rank() == 4 && x.rank() == 4 && is_float(x.dtype) && gy.dtype == x.dtype,
               "conv2d_weight_grad: needs an NCHW output gradient and input of one floating dtype");
  ZENITH_CHECK(gy.shape[1].is_const() && x.shape[1].is_const(), "conv2d_weight_grad: channel counts must be static");
  const auto st = pair_attr(n, "stride", 1), pd = pair_attr(n, "padding", 0), dl = pair_attr(n, "dilation", 1),
             k = pair_attr(n, "kernel", 1);
  const int64_t groups = n.i("groups", 1), OC = gy.shape[1].value(), C = x.shape[1].value();
  ZENITH_CHECK(groups >= 1 && OC % groups == 0 && C % groups == 0, "conv2d_weight_grad: ", C, " input and ", OC,
               " output channels do not split into ", groups, " groups");
  bool same = gy.shape[0].same(x.shape[0]);
  for (int d = 0; d < 2; ++d)
    same = same && gy.shape[size_t(2 + d)].same(conv_out(x.shape[size_t(2 + d)], k[size_t(d)], st[size_t(d)],
                                                          pd[size_t(d)], dl[size_t(d)], false));
  ZENITH_CHECK(same, "conv2d_weight_grad: the output gradient's shape is not the conv's output shape for this input");
  TensorType t;
  t.dtype = x.dtype;
  t.shape = {SymInt(OC), SymInt(C / groups), SymInt(k[0]), SymInt(k[1])};
  return {t};
}

Types infer_flip_filters(const Graph& g, const Node& n) {
  const auto& w = in(g, n, 0);
  ZENITH_CHECK(w.rank() == 4 && w.is_static(), "flip_filters: needs filters [A, B, KH, KW] of static shape");
  const int64_t groups = n.i("groups", 1), A = w.shape[0].value();
  ZENITH_CHECK(groups >= 1 && A % groups == 0, "flip_filters: ", A, " filters do not split into ", groups, " groups");
  TensorType t = w;
  t.shape = {SymInt(groups * w.shape[1].value()), SymInt(A / groups), w.shape[2], w.shape[3]};
  return {t};
}

// to_nchwc: float32 [N, C, H, W] (C static) -> [N, ceil(C / block), H, W, block].
Types infer_to_nchwc(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const int64_t L = n.i("block");
  ZENITH_CHECK(L == 8 || L == 16, "to_nchwc: block must be 8 or 16, got ", L);
  ZENITH_CHECK(x.rank() == 4 && x.dtype == DType::f32 && x.shape[1].is_const(),
               "to_nchwc: needs a float32 NCHW tensor with a static channel count");
  TensorType t = x;
  t.shape = {x.shape[0], SymInt((x.shape[1].value() + L - 1) / L), x.shape[2], x.shape[3], SymInt(L)};
  return {t};
}

// from_nchwc: [N, CB, H, W, L] -> [N, channels, H, W], channels in (CB - 1) * L + 1 .. CB * L.
Types infer_from_nchwc(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const int64_t C = n.i("channels");
  ZENITH_CHECK(x.rank() == 5 && x.dtype == DType::f32 && x.shape[1].is_const() && x.shape[4].is_const(),
               "from_nchwc: needs a float32 blocked tensor [N, CB, H, W, L]");
  const int64_t CB = x.shape[1].value(), L = x.shape[4].value();
  ZENITH_CHECK(C > (CB - 1) * L && C <= CB * L, "from_nchwc: ", C, " channels do not fill ", CB, " blocks of ", L);
  TensorType t = x;
  t.shape = {x.shape[0], SymInt(C), x.shape[2], x.shape[3]};
  return {t};
}

// conv2d_nchwc: conv2d's inputs with x (and the residual) blocked [N, CB, H, W, L] and
// w OIHW over CB * L or fewer channels (groups 1, or depthwise: [C, 1, KH, KW] with
// groups == C); the output [N, ceil(OC / L), OH, OW, L]. With `block` (L), x is NCHW
// [N, C, H, W] and the conv ungrouped. An int8 weight (u8 rows [OC, 4 + C * KH * KW],
// with `kernel`): groups 1 and a blocked x, an NCHW one with `block` (a stem), or codes
// u8 [N, H, W, C] with x_scale and `block`; with y_scale, the output codes u8
// [N, OH, OW, OC], after the blocked float output with y_float; with r_scale, the
// residual as codes u8 [N, OH, OW, OC].
Types infer_conv2d_nchwc(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const auto& w = in(g, n, 1);
  const bool residual = n.i("has_residual", 0) != 0;
  const size_t plain = n.inputs.size() - (residual ? 1 : 0);
  ZENITH_CHECK(plain == 3 || plain == 7, "conv2d_nchwc: takes conv2d's inputs; got ", n.inputs.size());
  ZENITH_CHECK(plain == 3 || n.has("bn_eps"), "conv2d_nchwc: fused batch-norm inputs without bn_eps");
  const int64_t block = n.i("block", 0);  // nonzero: x is NCHW, the output blocked by it
  const bool int8 = w.dtype == DType::u8, codes_in = int8 && x.dtype == DType::u8;
  ZENITH_CHECK(x.rank() == (block ? 4 : 5) && (x.dtype == DType::f32 || codes_in) &&
                   x.shape[codes_in ? 3 : 1].is_const() && (block || x.shape[4].is_const()) &&
                   w.rank() == (int8 ? 2 : 4) && w.is_static() && (int8 || w.dtype == DType::f32),
               "conv2d_nchwc: needs a float32 blocked input [N, CB, H, W, L] (NCHW with `block`; int8 codes [N, H, "
               "W, C] with an int8 weight) and a static float32 OIHW weight or int8 rows");
  ZENITH_CHECK(!codes_in || (block && n.has("x_scale")), "conv2d_nchwc: int8 codes as input need x_scale and `block`");
  ZENITH_CHECK(!n.has("y_scale") || (int8 && usable_scale(float(n.f("y_scale")))),
               "conv2d_nchwc: y_scale (int8 codes out) needs an int8 weight and a positive finite scale with a finite "
               "inverse");
  std::array<int64_t, 2> kernel{0, 0};
  int64_t groups = n.i("groups", 1), C = 0;
  if (int8) {
    if (n.has("kernel")) {
      const auto k = pair_attr(n, "kernel", 1);
      kernel = {k[0], k[1]};
    }
    ZENITH_CHECK(groups == 1 && kernel[0] > 0 && kernel[1] > 0 && w.shape[1].value() > 4 &&
                     (w.shape[1].value() - 4) % (kernel[0] * kernel[1]) == 0,
                 "conv2d_nchwc: an int8 weight needs one group and `kernel`, its rows 4 + C * KH * KW bytes (C >= 1)");
    C = (w.shape[1].value() - 4) / (kernel[0] * kernel[1]);
    check_x_scale(n);
  } else {
    ZENITH_CHECK(!n.has("x_scale") && !n.has("kernel"), "conv2d_nchwc: x_scale and kernel are for int8 weights");
    kernel = {w.shape[2].value(), w.shape[3].value()};
    C = w.shape[1].value() * groups;
  }
  const int64_t L = block ? block : x.shape[4].value(), CB = x.shape[codes_in ? 3 : 1].value(),
                OC = w.shape[0].value();
  ZENITH_CHECK(groups == 1 || (groups == OC && w.shape[1].value() == 1 && !block),
               "conv2d_nchwc: groups must be 1 or, for a depthwise conv over a blocked input, the channel count; got ",
               groups, " for ", OC, " output channels");
  ZENITH_CHECK(L == 8 || L == 16, "conv2d_nchwc: channel block ", L, " is not 8 or 16");
  if (block)
    ZENITH_CHECK(C == CB, "conv2d_nchwc: the weight's ", C, " input channels do not match the input's ", CB);
  else
    ZENITH_CHECK(C > (CB - 1) * L && C <= CB * L, "conv2d_nchwc: the weight's ", C,
                 " input channels do not fill the input's ", CB, " blocks of ", L);
  for (size_t k = n.i("has_bias", 0) ? 2 : 3; k < plain; ++k) {  // without a bias, slot 2 is a placeholder
    const auto& t = in(g, n, k);
    ZENITH_CHECK(t.rank() == 1 && t.shape[0].is_const() && t.shape[0].value() == OC && t.dtype == DType::f32,
                 "conv2d_nchwc: bias and batch-norm inputs must be float32 [", OC, "]");
  }
  auto st = pair_attr(n, "stride", 1), pd = pair_attr(n, "padding", 0), dl = pair_attr(n, "dilation", 1);
  const int hd = codes_in ? 1 : 2;  // x's height dim
  TensorType t;
  const SymInt OH = conv_out(x.shape[size_t(hd)], kernel[0], st[0], pd[0], dl[0], false),
               OW = conv_out(x.shape[size_t(hd + 1)], kernel[1], st[1], pd[1], dl[1], false);
  t.shape = {x.shape[0], SymInt((OC + L - 1) / L), OH, OW, SymInt(L)};
  const TensorType codes{DType::u8, {x.shape[0], OH, OW, SymInt(OC)}};
  const bool r_codes = residual && in(g, n, n.inputs.size() - 1).dtype == DType::u8;
  ZENITH_CHECK(r_codes == n.has("r_scale") && (!r_codes || (int8 && usable_scale(float(n.f("r_scale"))))),
               "conv2d_nchwc: a residual as codes (u8) goes with r_scale, a positive finite scale with a finite inverse, "
               "and an int8 weight");
  if (residual) {
    const auto& r = in(g, n, n.inputs.size() - 1);
    const TensorType& want = r_codes ? codes : t;
    bool same = r.dtype == want.dtype && r.rank() == want.rank();
    for (int d = 0; same && d < want.rank(); ++d) same = r.shape[size_t(d)].same(want.shape[size_t(d)]);
    ZENITH_CHECK(same, "conv2d_nchwc: the residual must be float32 with the output's blocked shape, or codes [N, OH, "
                 "OW, OC]");
  }
  ZENITH_CHECK(!n.i("y_float", 0) || n.has("y_scale"), "conv2d_nchwc: y_float needs y_scale");
  if (!n.has("y_scale")) return {t};
  if (n.i("y_float", 0)) return {t, codes};
  return {codes};
}

// conv2d_pw_dw: (x, w_pw, bias_pw[, bn x 4], w_dw, bias_dw[, bn x 4][, w_pj, bias_pj[, bn
// x 4][, residual]]), float32 only (fuse_conv_pw_dw makes it from two or three float32
// convs); expand=0: no w_pw, bias_pw or its bn. x NCHW, or blocked [N, CB, H, W, L] (the
// output and residual then blocked too, [N, ceil(P / L), OH, OW, L]).
Types infer_conv2d_pw_dw(const Graph& g, const Node& n) {
  const bool expand = n.i("expand", 1) != 0, project = n.i("project", 0) != 0, residual = n.i("has_residual", 0) != 0;
  const size_t q = !expand ? 1 : n.has("pw_bn_eps") ? 7 : 3, r = q + (n.has("bn_eps") ? 6 : 2);
  const size_t pj_inputs = (n.has("pj_bn_eps") ? 6 : 2) + (residual ? 1 : 0);
  const size_t total = project ? r + pj_inputs : r;
  ZENITH_CHECK(project || (!residual && !n.has("pj_bn_eps") && !n.i("pj_has_bias", 0) && !n.has("pj_activation")),
               "conv2d_pw_dw: a residual or projection epilogue without `project`");
  ZENITH_CHECK(expand || (project && !n.has("pw_bn_eps") && !n.i("pw_has_bias", 0) && !n.has("pw_activation")),
               "conv2d_pw_dw: expand=0 needs `project` and no pw_* epilogue");
  ZENITH_CHECK(n.inputs.size() == total, "conv2d_pw_dw: expected ", total, " inputs (the 1x1 conv's ",
               expand ? q : 0, " after x, the depthwise conv's ", r - q, ", the projection's ", project ? pj_inputs : 0,
               "), got ", n.inputs.size());
  const auto &x = in(g, n, 0), &w2 = in(g, n, q);
  const bool blocked = x.rank() == 5;  // [N, CB, H, W, L]: the blocked layout (conv2d_pw_dw_nchwc)
  ZENITH_CHECK((x.rank() == 4 || blocked) && w2.is_static() && w2.rank() == 4,
               "conv2d_pw_dw: needs an NCHW or blocked [N, CB, H, W, L] input and static OIHW weights");
  ZENITH_CHECK(x.shape[1].is_const() && (!blocked || x.shape[4].is_const()),
               "conv2d_pw_dw: needs a static channel count");
  const int64_t L = blocked ? x.shape[4].value() : 1, CB = x.shape[1].value();
  ZENITH_CHECK(!blocked || L == 8 || L == 16, "conv2d_pw_dw: channel block ", L, " is not 8 or 16");
  // The input's channels, c: x's own (NCHW), or filling its CB blocks (blocked).
  auto fills = [&](int64_t c) { return blocked ? c > (CB - 1) * L && c <= CB * L : c == CB; };
  int64_t E = expand ? 0 : w2.shape[0].value();  // the depthwise conv's channels
  if (expand) {
    const auto& w1 = in(g, n, 1);
    ZENITH_CHECK(w1.is_static() && w1.rank() == 4 && fills(w1.shape[1].value()) && w1.shape[2].value() == 1 &&
                     w1.shape[3].value() == 1,
                 "conv2d_pw_dw: the first weight must be a 1x1 conv's over the input's channels");
    E = w1.shape[0].value();
  } else {
    ZENITH_CHECK(fills(E), "conv2d_pw_dw: the depthwise weight's ", E, " channels are not the input's");
  }
  ZENITH_CHECK(w2.shape[0].value() == E && w2.shape[1].value() == 1,
               "conv2d_pw_dw: the depthwise weight must be a depthwise conv's over ", E, " channels");
  int64_t P = E;  // the output's channels
  if (project) {
    const auto& w3 = in(g, n, r);
    ZENITH_CHECK(w3.is_static() && w3.rank() == 4 && w3.shape[1].value() == E && w3.shape[2].value() == 1 &&
                     w3.shape[3].value() == 1,
                 "conv2d_pw_dw: the projection's weight must be a 1x1 conv's over the ", E, " depthwise channels");
    P = w3.shape[0].value();
  }
  // The per-channel inputs that are there (an absent bias's slot repeats the weight, as
  // conv2d's does), and the channels each has.
  std::vector<std::pair<size_t, int64_t>> vectors;
  if (n.i("pw_has_bias", 0)) vectors.push_back({2, E});
  for (size_t k = 3; k < q; ++k) vectors.push_back({k, E});
  if (n.i("has_bias", 0)) vectors.push_back({q + 1, E});
  for (size_t k = q + 2; k < r; ++k) vectors.push_back({k, E});
  if (project) {
    if (n.i("pj_has_bias", 0)) vectors.push_back({r + 1, P});
    for (size_t k = r + 2; k < total - (residual ? 1 : 0); ++k) vectors.push_back({k, P});
  }
  for (auto [k, ch] : vectors) {
    const auto& t = in(g, n, k);
    ZENITH_CHECK(t.rank() == 1 && t.shape[0].is_const() && t.shape[0].value() == ch, "conv2d_pw_dw: input ", k,
                 " must be a per-channel vector of ", ch);
  }
  for (size_t k = 0; k < total; ++k)
    ZENITH_CHECK(in(g, n, k).dtype == DType::f32, "conv2d_pw_dw: float32 only");
  auto st = pair_attr(n, "stride", 1), pd = pair_attr(n, "padding", 0), dl = pair_attr(n, "dilation", 1);
  TensorType t;
  t.dtype = DType::f32;
  t.shape = {x.shape[0], SymInt(blocked ? (P + L - 1) / L : P),
             conv_out(x.shape[2], w2.shape[2].value(), st[0], pd[0], dl[0], false),
             conv_out(x.shape[3], w2.shape[3].value(), st[1], pd[1], dl[1], false)};
  if (blocked) t.shape.push_back(SymInt(L));
  if (residual) {
    const auto& res = in(g, n, total - 1);
    bool same = res.rank() == t.rank();
    for (int d = 0; same && d < t.rank(); ++d) same = res.shape[size_t(d)].same(t.shape[size_t(d)]);
    ZENITH_CHECK(same, "conv2d_pw_dw: the residual must have the output's shape");
  }
  return {t};
}

Types infer_pool_of(const Graph& g, const Node& n, const TensorType& x) {  // pooling x (NCHW or CHW)
  ZENITH_CHECK(x.rank() == 4 || x.rank() == 3, op_info(n.op).name, ": needs (N)CHW input");
  ZENITH_CHECK(is_float(x.dtype), op_info(n.op).name, ": needs a floating input");
  auto k = pair_attr(n, "kernel", 1), st = pair_attr(n, "stride", 1), pd = pair_attr(n, "padding", 0);
  std::vector<int64_t> dl = n.has("dilation") ? pair_attr(n, "dilation", 1) : std::vector<int64_t>{1, 1};
  for (int j = 0; j < 2; ++j)  // as torch requires: no window lies wholly in the padding
    ZENITH_CHECK(pd[size_t(j)] <= (dl[size_t(j)] * (k[size_t(j)] - 1) + 1) / 2, op_info(n.op).name, ": padding ",
                 pd[size_t(j)], " exceeds half the window");
  bool ceil_mode = n.i("ceil_mode", 0) != 0;
  TensorType t = x;
  int r = x.rank();
  t.shape[size_t(r - 2)] = conv_out(x.shape[size_t(r - 2)], k[0], st[0], pd[0], dl[0], ceil_mode);
  t.shape[size_t(r - 1)] = conv_out(x.shape[size_t(r - 1)], k[1], st[1], pd[1], dl[1], ceil_mode);
  return {t};
}
Types infer_pool(const Graph& g, const Node& n) { return infer_pool_of(g, n, in(g, n, 0)); }

Types infer_max_pool2d_with_indices(const Graph& g, const Node& n) {
  Types t = infer_pool(g, n);
  t.push_back(TensorType{DType::i64, t[0].shape});
  return t;
}

Types infer_max_pool2d_backward(const Graph& g, const Node& n) {
  const auto &gy = in(g, n, 0), &x = in(g, n, 1), &idx = in(g, n, 2);
  bool ok = (x.rank() == 4 || x.rank() == 3) && gy.rank() == x.rank() && idx.rank() == x.rank() &&
            is_float(x.dtype) && gy.dtype == x.dtype && idx.dtype == DType::i64;
  for (int d = 0; ok && d < x.rank() - 2; ++d) ok = gy.shape[size_t(d)].same(x.shape[size_t(d)]);
  for (int d = 0; ok && d < x.rank(); ++d) ok = idx.shape[size_t(d)].same(gy.shape[size_t(d)]);
  ZENITH_CHECK(ok, "max_pool2d_backward: takes (gy, x, indices): gy and x of one floating dtype and (N)CHW, the "
               "indices i64 of gy's shape");
  return {x};
}

// max_pool2d_nchwc: float32 [N, CB, H, W, L] -> [N, CB, OH, OW, L], OH and OW as max_pool2d's.
Types infer_max_pool2d_nchwc(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  ZENITH_CHECK(x.rank() == 5 && x.dtype == DType::f32 && x.shape[4].is_const() &&
                   (x.shape[4].value() == 8 || x.shape[4].value() == 16),
               "max_pool2d_nchwc: needs a float32 blocked tensor [N, CB, H, W, 8 or 16]");
  TensorType nchw = x;  // the pooled dims are 2 and 3 of both layouts: max_pool2d's rule on [N, CB, H, W]
  nchw.shape.pop_back();
  TensorType t = infer_pool_of(g, n, nchw)[0];
  t.shape.push_back(x.shape[4]);
  return {t};
}

// max_pool2d_codes: int8 codes u8 [N, H, W, C] -> [N, OH, OW, C], OH and OW as max_pool2d's.
Types infer_max_pool2d_codes(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  ZENITH_CHECK(x.rank() == 4 && x.dtype == DType::u8 && x.shape[3].is_const(),
               "max_pool2d_codes: needs int8 codes u8 [N, H, W, C]");
  TensorType nchw = x;  // max_pool2d's rule on [N, C, H, W]
  nchw.dtype = DType::f32;
  nchw.shape = {x.shape[0], x.shape[3], x.shape[1], x.shape[2]};
  const TensorType p = infer_pool_of(g, n, nchw)[0];
  return {TensorType{DType::u8, {x.shape[0], p.shape[2], p.shape[3], x.shape[3]}}};
}

// [..., H, W] -> [..., size[0], size[1]] from the int list `attr` (adaptive_avg_pool2d's
// output_size, upsample2d's size), floating inputs only.
Types infer_resized_planes(const Graph& g, const Node& n, const char* attr) {
  TensorType t = in(g, n, 0);
  auto os = n.ints(attr);
  int r = t.rank();
  const char* op = op_info(n.op).name;
  ZENITH_CHECK(r >= 3 && os.size() == 2, op, ": needs (N)CHW input and 2 output sizes");
  ZENITH_CHECK(is_float(t.dtype), op, ": needs a floating input");
  for (const auto& o : os) ZENITH_CHECK(!o.is_const() || o.value() >= 0, op, ": negative output size ", o.value());
  t.shape[size_t(r - 2)] = os[0];
  t.shape[size_t(r - 1)] = os[1];
  return {t};
}
Types infer_adaptive_pool(const Graph& g, const Node& n) { return infer_resized_planes(g, n, "output_size"); }
Types infer_upsample2d(const Graph& g, const Node& n) { return infer_resized_planes(g, n, "size"); }

Types infer_sdpa(const Graph& g, const Node& n) {
  const auto& q = in(g, n, 0);
  const auto& k = in(g, n, 1);
  const auto& v = in(g, n, 2);
  ZENITH_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, "sdpa: needs rank-4 operands");
  ZENITH_CHECK(q.dtype == k.dtype && k.dtype == v.dtype && is_float(q.dtype), "sdpa: needs equal floating dtypes");
  int64_t layout = n.i("layout", 0);  // 0: (B, H, L, E) everywhere; 1: (B, L, H, E) in and out
  ZENITH_CHECK(layout == 0 || layout == 1, "sdpa: layout must be 0 or 1, got ", layout);
  const int hd = layout == 1 ? 2 : 1;  // the heads dim
  if (q.shape[size_t(hd)].is_const() && k.shape[size_t(hd)].is_const())
    ZENITH_CHECK(q.shape[size_t(hd)].value() % k.shape[size_t(hd)].value() == 0, "sdpa: query heads ",
                 q.shape[size_t(hd)].value(), " not a multiple of key heads ", k.shape[size_t(hd)].value());
  const int ld = layout == 1 ? 1 : 2;  // the sequence dim
  auto same = [&](const SymInt& a, const SymInt& b, const char* what) {
    ZENITH_CHECK(dims_match(a, b), "sdpa: ", what, " differ (", a.str(g.symbols), " vs ", b.str(g.symbols), ")");
  };
  same(q.shape[0], k.shape[0], "query and key batch sizes");
  same(k.shape[0], v.shape[0], "key and value batch sizes");
  same(k.shape[size_t(hd)], v.shape[size_t(hd)], "key and value heads");
  same(k.shape[size_t(ld)], v.shape[size_t(ld)], "key and value lengths");
  same(q.shape[3], k.shape[3], "query and key embedding sizes");
  if (n.i("has_mask", 0)) {
    const auto& m = in(g, n, 3);
    ZENITH_CHECK(m.dtype == DType::b8 || m.dtype == q.dtype, "sdpa: mask must be bool or the query dtype");
    ZENITH_CHECK(m.rank() <= 4, "sdpa: mask rank ", m.rank(), " > 4");
    Shape scores = {q.shape[0], q.shape[size_t(hd)], q.shape[size_t(ld)], k.shape[size_t(ld)]};
    Shape b = broadcast_shapes(m.shape, scores, "sdpa mask");
    for (size_t d = 0; d < 4; ++d)
      ZENITH_CHECK(!b[d].is_const() || !scores[d].is_const() || b[d].value() == scores[d].value(),
                   "sdpa: the mask does not broadcast to the scores' shape");
  }
  TensorType t = q;
  t.shape[3] = v.shape[3];
  return {t};
}

Types infer_reshape(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  TensorType t;
  t.dtype = x.dtype;
  t.shape = n.ints("shape");
  for (auto& d : t.shape) ZENITH_CHECK(!d.is_const() || d.value() >= 0, "reshape: negative dim in target shape");
  if (x.is_static() && t.is_static())
    ZENITH_CHECK(x.static_numel() == t.static_numel(), "reshape: ", x.static_numel(), " elements into ",
                 t.static_numel());
  return {t};
}

Types infer_permute(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  auto p = n.const_ints("perm");
  ZENITH_CHECK(int(p.size()) == x.rank(), "permute: perm has ", p.size(), " entries for rank ", x.rank());
  std::vector<bool> seen(p.size(), false);
  TensorType t;
  t.dtype = x.dtype;
  for (int64_t d : p) {
    d = norm_dim(d, x.rank(), "permute");
    ZENITH_CHECK(!seen[size_t(d)], "permute: repeated dim");
    seen[size_t(d)] = true;
    t.shape.push_back(x.shape[size_t(d)]);
  }
  return {t};
}

Types infer_expand(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const auto& s = n.ints("shape");
  ZENITH_CHECK(s.size() >= size_t(x.rank()), "expand: target rank below input rank");
  TensorType t;
  t.dtype = x.dtype;
  t.shape = s;
  size_t off = s.size() - size_t(x.rank());
  for (size_t i = 0; i < size_t(x.rank()); ++i) {
    const SymInt& xd = x.shape[i];
    if (xd.is_const() && xd.value() == 1) continue;
    ZENITH_CHECK(dims_match(xd, s[off + i]), "expand: dim ", i, " of size ", xd.str(g.symbols), " cannot become ",
                 s[off + i].str(g.symbols));
  }
  return {t};
}

Types infer_slice(const Graph& g, const Node& n) {
  TensorType t = in(g, n, 0);
  ZENITH_CHECK(t.rank() >= 1, "slice: cannot slice a 0-d tensor");
  int64_t d = norm_dim(n.i("dim"), t.rank(), "slice");
  int64_t step = n.i("step", 1);
  ZENITH_CHECK(step >= 1, "slice: step must be positive");
  ZENITH_CHECK(n.ints("start").size() == 1 && n.ints("end").size() == 1, "slice: start and end need one value each");
  ZENITH_CHECK(!n.has("out_size") || n.ints("out_size").size() == 1, "slice: out_size needs one value");
  const SymInt& size = t.shape[size_t(d)];
  const SymInt& s = n.ints("start")[0];
  const SymInt& e = n.ints("end")[0];
  if (size.is_const() && s.is_const() && e.is_const()) {
    int64_t L = size.value(), a = s.value(), b = e.value();
    if (a < 0) a += L;
    if (b < 0) b += L;
    a = std::clamp<int64_t>(a, 0, L);
    b = std::clamp<int64_t>(b, a, L);
    t.shape[size_t(d)] = (b - a + step - 1) / step;
  } else {
    ZENITH_CHECK(n.has("out_size"), "slice: symbolic bounds need the out_size attribute");
    t.shape[size_t(d)] = n.ints("out_size")[0];
  }
  return {t};
}

Types infer_cat(const Graph& g, const Node& n) {
  ZENITH_CHECK(!n.inputs.empty(), "cat: no inputs");
  TensorType t = in(g, n, 0);
  ZENITH_CHECK(t.rank() >= 1, "cat: cannot concatenate 0-d tensors");
  int64_t d = norm_dim(n.i("dim"), t.rank(), "cat");
  SymInt total = 0;
  bool sym = false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const auto& x = in(g, n, i);
    ZENITH_CHECK(x.dtype == t.dtype, "cat: input ", i, " has dtype ", dtype_name(x.dtype));
    ZENITH_CHECK(x.rank() == t.rank(), "cat: input ", i, " has rank ", x.rank());
    for (int k = 0; k < t.rank(); ++k)
      ZENITH_CHECK(k == d || dims_match(x.shape[size_t(k)], t.shape[size_t(k)]), "cat: input ", i, " has size ",
                   x.shape[size_t(k)].str(g.symbols), " at dim ", k, ", input 0 ", t.shape[size_t(k)].str(g.symbols));
    const SymInt& s = x.shape[size_t(d)];
    if (s.is_const() && total.is_const()) total = total.value() + s.value();
    else sym = true;
  }
  if (sym) {
    ZENITH_CHECK(n.has("out_size") && n.ints("out_size").size() == 1, "cat: symbolic sizes need the out_size attribute");
    total = n.ints("out_size")[0];
  }
  t.shape[size_t(d)] = total;
  return {t};
}

Types infer_pad(const Graph& g, const Node& n) {
  TensorType t = in(g, n, 0);
  auto p = n.const_ints("pad");
  ZENITH_CHECK(p.size() % 2 == 0 && p.size() / 2 <= size_t(t.rank()), "pad: bad pad list");
  for (size_t i = 0; i < p.size() / 2; ++i) {
    size_t d = size_t(t.rank()) - 1 - i;
    t.shape[d] = sym_add_const(t.shape[d], p[2 * i] + p[2 * i + 1]);
    ZENITH_CHECK(!t.shape[d].is_const() || t.shape[d].value() >= 0, "pad: dim ", d, " would have negative size ",
                 t.shape[d].value());
  }
  return {t};
}

Types infer_embedding(const Graph& g, const Node& n) {
  const auto& w = in(g, n, 0);
  const auto& idx = in(g, n, 1);
  ZENITH_CHECK(w.rank() == 2, "embedding: weight must be 2-D");
  ZENITH_CHECK(idx.dtype == DType::i64 || idx.dtype == DType::i32, "embedding: indices must be integer");
  TensorType t;
  t.dtype = w.dtype;
  t.shape = idx.shape;
  t.shape.push_back(w.shape[1]);
  return {t};
}

Types infer_index_select(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const auto& idx = in(g, n, 1);
  ZENITH_CHECK(idx.dtype == DType::i64 || idx.dtype == DType::i32, "index_select: index must be integer");
  int64_t d = norm_dim(n.i("dim"), x.rank(), "index_select");
  TensorType t;
  t.dtype = x.dtype;
  if (x.rank() == 0) {  // torch indexes a 0-d tensor as one of size 1 and keeps the result 0-d
    ZENITH_CHECK(idx.rank() <= 1 && (!idx.is_static() || idx.static_numel() == 1),
                 "index_select: a 0-d input takes a single index");
    return {t};
  }
  t.shape.assign(x.shape.begin(), x.shape.begin() + d);
  t.shape.insert(t.shape.end(), idx.shape.begin(), idx.shape.end());
  t.shape.insert(t.shape.end(), x.shape.begin() + d + 1, x.shape.end());
  return {t};
}

Types infer_gather(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  const auto& idx = in(g, n, 1);
  ZENITH_CHECK(idx.dtype == DType::i64 || idx.dtype == DType::i32, "gather: index must be integer");
  ZENITH_CHECK(idx.rank() == x.rank(), "gather: index rank differs from input rank");
  int64_t d = norm_dim(n.i("dim"), x.rank(), "gather");
  for (int k = 0; k < x.rank(); ++k) {  // the kernel reads x at the index's positions along the other dims
    const SymInt &a = idx.shape[size_t(k)], &b = x.shape[size_t(k)];
    ZENITH_CHECK(k == d || !a.is_const() || !b.is_const() || a.value() <= b.value(), "gather: index size ",
                 a.value(), " exceeds the input's ", b.value(), " at dim ", k);
  }
  TensorType t;
  t.dtype = x.dtype;
  t.shape = idx.shape;
  return {t};
}

// Advanced indexing (numpy rules): the index tensors broadcast to shape B. If the
// indexed dims are adjacent, B replaces them in place; otherwise B comes first.
Types infer_index(const Graph& g, const Node& n) {
  ZENITH_CHECK(n.inputs.size() >= 2, "index: needs a tensor and at least one index");
  const auto& x = in(g, n, 0);
  auto dims = n.const_ints("dims");
  ZENITH_CHECK(dims.size() == n.inputs.size() - 1, "index: ", dims.size(), " dims for ", n.inputs.size() - 1,
               " index tensors");
  Shape b;
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    const auto& t = in(g, n, k);
    ZENITH_CHECK(t.dtype == DType::i64 || t.dtype == DType::i32, "index: index tensors must be integer");
    b = broadcast_shapes(b, t.shape, "index");
  }
  bool adjacent = true;
  for (size_t k = 0; k < dims.size(); ++k) {
    ZENITH_CHECK(dims[k] >= 0 && dims[k] < x.rank(), "index: dim ", dims[k], " out of range");
    if (k && dims[k] != dims[k - 1] + 1) adjacent = false;
    ZENITH_CHECK(!k || dims[k] > dims[k - 1], "index: dims must ascend");
  }
  TensorType t;
  t.dtype = x.dtype;
  if (adjacent) {
    t.shape.assign(x.shape.begin(), x.shape.begin() + dims.front());
    t.shape.insert(t.shape.end(), b.begin(), b.end());
    t.shape.insert(t.shape.end(), x.shape.begin() + dims.back() + 1, x.shape.end());
  } else {
    t.shape = b;
    for (int d = 0; d < x.rank(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) t.shape.push_back(x.shape[size_t(d)]);
  }
  return {t};
}

Types infer_index_put(const Graph& g, const Node& n) {
  const bool zeros = n.has("zeros_rows");
  ZENITH_CHECK(n.inputs.size() == (zeros ? 2u : 3u), "index_put: takes (x, idx, values), or (idx, values) with "
               "zeros_rows");
  const size_t first = zeros ? 0 : 1;
  const auto& idx = in(g, n, first);
  const auto& v = in(g, n, first + 1);
  ZENITH_CHECK(idx.dtype == DType::i64 || idx.dtype == DType::i32, "index_put: index must be integer");
  TensorType x;
  if (zeros) {
    int64_t rows = n.i("zeros_rows");
    ZENITH_CHECK(rows >= 0, "index_put: negative zeros_rows ", rows);
    ZENITH_CHECK(v.rank() >= idx.rank(), "index_put: values of lower rank than the index");
    x.dtype = v.dtype;
    x.shape.push_back(SymInt(rows));
    x.shape.insert(x.shape.end(), v.shape.begin() + idx.rank(), v.shape.end());
  } else {
    x = in(g, n, 0);
  }
  ZENITH_CHECK(x.rank() >= 1, "index_put: needs rank >= 1");
  ZENITH_CHECK(v.dtype == x.dtype, "index_put: values are ", dtype_name(v.dtype), ", the tensor ", dtype_name(x.dtype));
  ZENITH_CHECK(!n.i("accumulate", 0) || x.dtype == DType::f32 || x.dtype == DType::i64 || x.dtype == DType::i32,
               "index_put: accumulate takes f32, i64 or i32, not ", dtype_name(x.dtype));
  std::vector<SymInt> want = idx.shape;
  want.insert(want.end(), x.shape.begin() + 1, x.shape.end());
  bool same = want.size() == v.shape.size();
  for (size_t k = 0; same && k < want.size(); ++k) same = want[k].same(v.shape[k]);
  ZENITH_CHECK(same, "index_put: values must have the index's shape followed by the tensor's trailing dims");
  return {x};
}

Types infer_tril(const Graph& g, const Node& n) {
  const auto& x = in(g, n, 0);
  ZENITH_CHECK(x.rank() >= 2, "tril: needs rank >= 2");
  return {x};
}

Types infer_constant(const Graph&, const Node& n) {
  TensorType t;
  t.dtype = dtype_attr(n);
  t.shape = n.ints("shape");
  for (const auto& d : t.shape)
    ZENITH_CHECK(!d.is_const() || d.value() >= 0, op_info(n.op).name, ": negative dim ", d.value());
  return {t};
}

Types infer_arange(const Graph&, const Node& n) {
  TensorType t;
  t.dtype = dtype_attr(n);
  ZENITH_CHECK(n.has("size") && n.ints("size").size() == 1, "arange: needs its size attribute");
  t.shape = {n.ints("size")[0]};
  ZENITH_CHECK(!t.shape[0].is_const() || t.shape[0].value() >= 0, "arange: negative size ", t.shape[0].value());
  return {t};
}

Types infer_sym_value(const Graph&, const Node& n) {
  TensorType t;
  t.dtype = dtype_attr(n);
  ZENITH_CHECK(t.dtype == DType::i64 || t.dtype == DType::i32 || t.dtype == DType::f32, "sym_value: makes i64, i32 "
               "or f32, not ", dtype_name(t.dtype));
  return {t};  // shape {}: one value
}

// Table glue: every op names its inference function here, once.
#define INFER_neg unary_numeric
#define INFER_abs unary_numeric
#define INFER_exp unary_float
#define INFER_log unary_float
#define INFER_log1p unary_float
#define INFER_expm1 unary_float
#define INFER_sqrt unary_float
#define INFER_rsqrt unary_float
#define INFER_reciprocal unary_float
#define INFER_sin unary_float
#define INFER_cos unary_float
#define INFER_tanh unary_float
#define INFER_erf unary_float
#define INFER_sigmoid unary_float
#define INFER_relu unary_numeric
#define INFER_gelu unary_float
#define INFER_silu unary_float
#define INFER_hardswish unary_float
#define INFER_hardsigmoid unary_float
#define INFER_floor unary_numeric
#define INFER_ceil unary_numeric
#define INFER_clamp unary_numeric
#define INFER_logical_not bool_unary
#define INFER_isnan bool_unary
#define INFER_cast infer_cast
#define INFER_add binary_arith
#define INFER_sub binary_arith
#define INFER_mul binary_arith
#define INFER_div binary_arith
#define INFER_pow binary_arith
#define INFER_remainder binary_arith
#define INFER_maximum binary_arith
#define INFER_minimum binary_arith
#define INFER_eq binary_cmp
#define INFER_ne binary_cmp
#define INFER_lt binary_cmp
#define INFER_le binary_cmp
#define INFER_gt binary_cmp
#define INFER_ge binary_cmp
#define INFER_logical_and binary_logical
#define INFER_logical_or binary_logical
#define INFER_where infer_where
#define INFER_fused infer_fused
#define INFER_reduce_sum infer_reduce
#define INFER_reduce_mean infer_reduce
#define INFER_reduce_max infer_reduce
#define INFER_reduce_min infer_reduce
#define INFER_reduce_prod infer_reduce
#define INFER_argmax infer_argmax
#define INFER_cumsum infer_dim_op
#define INFER_softmax infer_dim_op
#define INFER_log_softmax infer_dim_op
#define INFER_layer_norm infer_norm
#define INFER_rms_norm infer_norm
#define INFER_batch_norm infer_batch_norm
#define INFER_matmul infer_matmul
#define INFER_addmm infer_addmm
#define INFER_addmm_parts infer_addmm_parts
#define INFER_conv2d infer_conv2d
#define INFER_conv2d_pw_dw infer_conv2d_pw_dw
#define INFER_to_nchwc infer_to_nchwc
#define INFER_from_nchwc infer_from_nchwc
#define INFER_conv2d_nchwc infer_conv2d_nchwc
#define INFER_conv_transpose2d infer_conv_transpose2d
#define INFER_conv2d_weight_grad infer_conv2d_weight_grad
#define INFER_flip_filters infer_flip_filters
#define INFER_sdpa infer_sdpa
#define INFER_qmatmul infer_qmatmul
#define INFER_qembedding infer_qembedding
#define INFER_max_pool2d infer_pool
#define INFER_max_pool2d_with_indices infer_max_pool2d_with_indices
#define INFER_max_pool2d_backward infer_max_pool2d_backward
#define INFER_max_pool2d_nchwc infer_max_pool2d_nchwc
#define INFER_max_pool2d_codes infer_max_pool2d_codes
#define INFER_avg_pool2d infer_pool
#define INFER_adaptive_avg_pool2d infer_adaptive_pool
#define INFER_upsample2d infer_upsample2d
#define INFER_reshape infer_reshape
#define INFER_copy same_as_input
#define INFER_permute infer_permute
#define INFER_expand infer_expand
#define INFER_slice infer_slice
#define INFER_cat infer_cat
#define INFER_pad infer_pad
#define INFER_embedding infer_embedding
#define INFER_index_select infer_index_select
#define INFER_gather infer_gather
#define INFER_index infer_index
#define INFER_index_put infer_index_put
#define INFER_tril infer_tril
#define INFER_constant infer_constant
#define INFER_full infer_constant
#define INFER_arange infer_arange
#define INFER_sym_value infer_sym_value

// u8 is quantized weight storage: the quantized ops read it (and conv2d and conv2d_nchwc
// as their weight: int8 filters; an int8 conv2d_nchwc also its codes in and out, and
// max_pool2d_codes its codes) and data movement (kDtypeGeneric: copies, indexing, cast, sources) moves
// it; every other op and operand refuses it here, once for the whole table, so no
// arithmetic kernel ever sees one.
template <InferFn F, uint32_t kTraits>
Types infer_checking_u8(const Graph& g, const Node& n) {
  Types out = F(g, n);
  if ((kTraits & kDtypeGeneric) || n.op == Op::qmatmul || n.op == Op::qembedding) return out;
  bool u8 = false;
  // a conv's weight, and its bias slot when it has no bias (the slot repeats the weight)
  auto weight = [&](size_t i) {
    return (n.op == Op::conv2d || n.op == Op::conv2d_nchwc) && (i == 1 || (i == 2 && !n.i("has_bias", 0)));
  };
  // an int8 conv2d_nchwc's codes in and out (infer_conv2d_nchwc checks them), and
  // max_pool2d_codes' (its inference takes codes only)
  const bool codes = (n.op == Op::conv2d_nchwc && n.inputs.size() > 1 && in(g, n, 1).dtype == DType::u8) ||
                     n.op == Op::max_pool2d_codes;
  const size_t last = n.inputs.size() - 1;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    u8 = u8 || (in(g, n, i).dtype == DType::u8 && !weight(i) &&
                !(codes && (i == 0 || (i == last && n.i("has_residual", 0)))));
  for (const auto& t : out) u8 = u8 || (t.dtype == DType::u8 && !codes);
  ZENITH_CHECK(!u8, op_info(n.op).name, ": u8 is quantized weight storage; only qmatmul, qembedding, a conv's weight, "
               "int8 codes between int8 convs and data movement take it");
  return out;
}

const OpInfo kOps[] = {
#define OP(name, nin, nout, traits, attrs) {#name, nin, nout, traits, infer_checking_u8<INFER_##name, (traits)>},
#include "zenith/ops.def"
#undef OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == size_t(Op::kCount), "op table and enum disagree");

}  // namespace

const OpInfo& op_info(Op op) { return kOps[size_t(op)]; }

bool parse_op(const std::string& name, Op* out) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOps[i].name) {
      *out = Op(i);
      return true;
    }
  return false;
}

bool parse_dtype(const std::string& s, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (s == dtype_name(DType(i))) {
      *out = DType(i);
      return true;
    }
  return false;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const SymInt* x = i < r - a.size() ? nullptr : &a[i - (r - a.size())];
    const SymInt* y = i < r - b.size() ? nullptr : &b[i - (r - b.size())];
    if (!x) { out[i] = *y; continue; }
    if (!y) { out[i] = *x; continue; }
    if (x->is_const() && x->value() == 1) out[i] = *y;
    else if (y->is_const() && y->value() == 1) out[i] = *x;
    else if (x->is_const() && y->is_const()) {
      ZENITH_CHECK(x->value() == y->value(), op, ": shapes do not broadcast (", x->value(), " vs ", y->value(),
                   " at dim ", i, ")");
      out[i] = *x;
    } else {
      out[i] = x->is_const() ? *x : *y;  // a constant pins the symbol; otherwise guards made them equal
    }
  }
  return out;
}

// ---- Node attribute access ----
int64_t Node::i(const std::string& k) const {
  auto it = attrs.find(k);
  ZENITH_CHECK(it != attrs.end() && !it->second.ints.empty(), op_info(op).name, ": missing int attribute '", k, "'");
  ZENITH_CHECK(it->second.ints[0].is_const(), op_info(op).name, ": attribute '", k, "' is symbolic");
  return it->second.ints[0].value();
}
int64_t Node::i(const std::string& k, int64_t dflt) const { return has(k) ? i(k) : dflt; }
const std::vector<SymInt>& Node::ints(const std::string& k) const {
  auto it = attrs.find(k);
  ZENITH_CHECK(it != attrs.end(), op_info(op).name, ": missing attribute '", k, "'");
  return it->second.ints;
}
std::vector<int64_t> Node::const_ints(const std::string& k) const {
  std::vector<int64_t> r;
  for (const auto& s : ints(k)) {
    ZENITH_CHECK(s.is_const(), op_info(op).name, ": attribute '", k, "' is symbolic");
    r.push_back(s.value());
  }
  return r;
}
double Node::f(const std::string& k) const {
  auto it = attrs.find(k);
  ZENITH_CHECK(it != attrs.end() && !it->second.floats.empty(), op_info(op).name, ": missing float attribute '", k,
               "'");
  return it->second.floats[0];
}
double Node::f(const std::string& k, double dflt) const { return has(k) ? f(k) : dflt; }
void Node::set_ints(const std::string& k, std::vector<SymInt> v) {
  Attr a;
  a.kind = Attr::kInts;
  a.ints = std::move(v);
  attrs[k] = std::move(a);
}
void Node::set_floats(const std::string& k, std::vector<double> v) {
  Attr a;
  a.kind = Attr::kFloats;
  a.floats = std::move(v);
  attrs[k] = std::move(a);
}

bool TensorType::is_static() const {
  for (const auto& d : shape)
    if (!d.is_const()) return false;
  return true;
}
int64_t TensorType::static_numel() const {
  int64_t n = 1;
  for (const auto& d : shape) n *= d.value();
  return n;
}

std::vector<int64_t> TensorType::static_dims() const {
  std::vector<int64_t> dims;
  dims.reserve(shape.size());
  for (const auto& d : shape) dims.push_back(d.value());
  return dims;
}

namespace {
// bounded_nbytes over dims that are each a size, or -1 for one that is not (symbolic).
template <class Dims, class Size>
bool bounded_bytes(DType dtype, const Dims& dims, Size size, uint64_t limit, uint64_t* bytes) {
  uint64_t n = dtype_size(dtype);
  for (const auto& dim : dims) {
    const int64_t d = size(dim);
    if (d < 0 || (d && n > limit / uint64_t(d))) return false;
    n *= uint64_t(d);
  }
  *bytes = n;
  return true;
}
}  // namespace

bool bounded_nbytes(const TensorType& t, uint64_t limit, uint64_t* bytes) {
  return bounded_bytes(t.dtype, t.shape, [](const SymInt& d) { return d.is_const() ? d.value() : int64_t(-1); },
                       limit, bytes);
}

bool bounded_nbytes(DType dtype, const std::vector<int64_t>& dims, uint64_t limit, uint64_t* bytes) {
  return bounded_bytes(dtype, dims, [](int64_t d) { return d; }, limit, bytes);
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string r = "[";
  for (size_t i = 0; i < dims.size(); ++i) r += (i ? ", " : "") + std::to_string(dims[i]);
  return r + "]";
}

}  // namespace zenith
