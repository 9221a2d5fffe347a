// Data movement, indexing, sources and pooling. Movement kernels work on element
// bytes, so every dtype goes through the same code.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "zenith/error.h"
#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith {

void cast_buffer(const void* src, DType sd, void* dst, DType dd, int64_t n);  // elementwise.cc

void strided_copy(void* dst, const void* src, size_t elem, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides) {
  int r = int(shape.size());
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) return;
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  if (r == 0) {
    std::memcpy(out, in, elem);
    return;
  }
  int64_t inner = shape[size_t(r - 1)], is = strides[size_t(r - 1)];
  std::vector<int64_t> idx(size_t(r), 0);
  int64_t off = 0;
  for (int64_t o = 0; o < numel; o += inner) {
    const char* s = in + off * int64_t(elem);
    char* d = out + o * int64_t(elem);
    if (is == 1) {
      std::memcpy(d, s, size_t(inner) * elem);
    } else if (elem == 4) {
      for (int64_t i = 0; i < inner; ++i) std::memcpy(d + i * 4, s + i * is * 4, 4);
    } else {
      for (int64_t i = 0; i < inner; ++i) std::memcpy(d + size_t(i) * elem, s + i * is * int64_t(elem), elem);
    }
    for (int dd = r - 2; dd >= 0; --dd) {
      size_t du = size_t(dd);
      off += strides[du];
      if (++idx[du] < shape[du]) break;
      off -= strides[du] * shape[du];
      idx[du] = 0;
    }
  }
}

void run_reshape(const KernelCtx&) {}  // aliases its input; the runtime shares the buffer
void run_constant(const KernelCtx&) {}

void run_copy(const KernelCtx& c) {
  std::memcpy(c.out[0].data, c.in[0].data, size_t(c.in[0].numel()) * dtype_size(c.in[0].dtype));
}

void run_permute(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  const auto& perm = c.a<attrs::permute>().perm;
  std::vector<int64_t> cs = contiguous_strides(x.shape), st;
  for (int64_t p : perm) st.push_back(cs[size_t(p < 0 ? p + x.rank() : p)]);
  strided_copy(c.out[0].data, x.data, dtype_size(x.dtype), c.out[0].shape, st);
}

void run_expand(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  const auto& os = c.out[0].shape;
  std::vector<int64_t> cs = contiguous_strides(x.shape), st(os.size(), 0);
  size_t off = os.size() - size_t(x.rank());
  for (size_t d = 0; d < size_t(x.rank()); ++d) st[off + d] = x.shape[d] == 1 ? 0 : cs[d];
  strided_copy(c.out[0].data, x.data, dtype_size(x.dtype), os, st);
}

void run_slice(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  const auto& a = c.a<attrs::slice>();
  int64_t d = a.dim;
  if (d < 0) d += x.rank();
  int64_t L = x.shape[size_t(d)], start = a.start.at(0), step = a.step;
  if (start < 0) start += L;
  start = std::clamp<int64_t>(start, 0, L);
  std::vector<int64_t> st = contiguous_strides(x.shape);
  const char* base = static_cast<const char*>(x.data) + start * st[size_t(d)] * int64_t(dtype_size(x.dtype));
  st[size_t(d)] *= step;
  strided_copy(c.out[0].data, base, dtype_size(x.dtype), c.out[0].shape, st);
}

void run_cat(const KernelCtx& c) {
  TensorRef& o = c.out[0];
  int64_t d = c.a<attrs::cat>().dim;
  if (d < 0) d += o.rank();
  size_t es = dtype_size(o.dtype);
  int64_t outer = 1;
  for (int64_t i = 0; i < d; ++i) outer *= o.shape[size_t(i)];
  int64_t out_row = 1;
  for (int64_t i = d; i < o.rank(); ++i) out_row *= o.shape[size_t(i)];
  int64_t col = 0;
  for (const TensorRef& x : c.in) {
    int64_t row = 1;
    for (int64_t i = d; i < x.rank(); ++i) row *= x.shape[size_t(i)];
    for (int64_t r = 0; r < outer; ++r)
      std::memcpy(static_cast<char*>(o.data) + size_t(r * out_row + col) * es,
                  static_cast<const char*>(x.data) + size_t(r * row) * es, size_t(row) * es);
    col += row;
  }
}

namespace {
void fill_value(void* dst, DType dt, int64_t n, double v) {
  switch (dt) {
    case DType::f32: std::fill_n(static_cast<float*>(dst), n, float(v)); break;
    case DType::f16: std::fill_n(static_cast<uint16_t*>(dst), n, f32_to_f16(float(v))); break;
    case DType::bf16: std::fill_n(static_cast<uint16_t*>(dst), n, f32_to_bf16(float(v))); break;
    case DType::i64: std::fill_n(static_cast<int64_t*>(dst), n, int64_t(v)); break;
    case DType::i32: std::fill_n(static_cast<int32_t*>(dst), n, int32_t(v)); break;
    case DType::b8: std::fill_n(static_cast<bool*>(dst), n, v != 0.0); break;
    case DType::u8: std::fill_n(static_cast<uint8_t*>(dst), n, uint8_t(int64_t(v))); break;
  }
}
}  // namespace

void run_pad(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  TensorRef& o = c.out[0];
  const auto& a = c.a<attrs::pad>();
  const auto& pad = a.pad;
  fill_value(o.data, o.dtype, o.numel(), a.value);
  size_t es = dtype_size(x.dtype);
  int r = x.rank();
  // The overlap of input and output, per dim (negative pads crop).
  std::vector<int64_t> shape(static_cast<size_t>(r), 0), src_off(static_cast<size_t>(r), 0), dst_off(static_cast<size_t>(r), 0);
  for (int d = 0; d < r; ++d) {
    int k = r - 1 - d;  // pad pairs run from the last dim backwards
    int64_t lo = size_t(k) < pad.size() / 2 ? pad[size_t(2 * k)] : 0;
    src_off[size_t(d)] = lo < 0 ? -lo : 0;
    dst_off[size_t(d)] = lo > 0 ? lo : 0;
    shape[size_t(d)] = std::max<int64_t>(
        0, std::min(x.shape[size_t(d)] - src_off[size_t(d)], o.shape[size_t(d)] - dst_off[size_t(d)]));
  }
  std::vector<int64_t> xs = contiguous_strides(x.shape), os = contiguous_strides(o.shape);
  int64_t sbase = 0, dbase = 0;
  for (int d = 0; d < r; ++d) {
    sbase += src_off[size_t(d)] * xs[size_t(d)];
    dbase += dst_off[size_t(d)] * os[size_t(d)];
  }
  // Copy row by row: gather the overlap densely, then scatter into the output rows.
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n == 0) return;
  std::vector<char> tmp(size_t(n) * es);
  strided_copy(tmp.data(), static_cast<const char*>(x.data) + sbase * int64_t(es), es, shape, xs);
  int64_t inner = r ? shape[size_t(r - 1)] : 1;
  std::vector<int64_t> idx(size_t(r), 0);
  for (int64_t i = 0; i < n; i += inner) {
    int64_t doff = dbase;
    for (int d = 0; d < r - 1; ++d) doff += idx[size_t(d)] * os[size_t(d)];
    std::memcpy(static_cast<char*>(o.data) + doff * int64_t(es), tmp.data() + i * int64_t(es), size_t(inner) * es);
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
}

namespace {
int64_t load_index(const TensorRef& idx, int64_t i) {
  return idx.dtype == DType::i64 ? idx.as<int64_t>()[i] : int64_t(idx.as<int32_t>()[i]);
}
// v, or with `negative` v + size for v < 0; an error names the index as given.
int64_t check_index(int64_t v, int64_t size, const char* op, bool negative = true) {
  const int64_t at = negative && v < 0 ? v + size : v;
  ZENITH_CHECK(at >= 0 && at < size, op, ": index ", v, " is out of bounds for size ", size);
  return at;
}
}  // namespace

void run_embedding(const KernelCtx& c) {
  const TensorRef &w = c.in[0], &idx = c.in[1];
  int64_t rows = w.shape[0], dim = w.shape[1];
  size_t rb = size_t(dim) * dtype_size(w.dtype);
  int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = load_index(idx, i);
    ZENITH_CHECK(r >= 0 && r < rows, "embedding: index ", r, " is out of range for ", rows, " rows");
    std::memcpy(static_cast<char*>(c.out[0].data) + size_t(i) * rb, static_cast<const char*>(w.data) + size_t(r) * rb, rb);
  }
}

void run_index_select(const KernelCtx& c) {
  const TensorRef &x = c.in[0], &idx = c.in[1];
  int64_t d = c.a<attrs::index_select>().dim;
  if (d < 0) d += std::max(x.rank(), 1);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape[size_t(i)];
  for (int64_t i = d + 1; i < x.rank(); ++i) inner *= x.shape[size_t(i)];
  // A 0-d input is indexed as a 1-element dim (inference took a single index).
  int64_t size = x.rank() == 0 ? 1 : x.shape[size_t(d)], n = idx.numel();
  ZENITH_CHECK(x.rank() > 0 || n == 1, "index_select: a 0-d input takes a single index, got ", n);
  size_t es = dtype_size(x.dtype), rb = size_t(inner) * es;
  char* out = static_cast<char*>(c.out[0].data);
  const char* in = static_cast<const char*>(x.data);
  std::vector<int64_t> ids(static_cast<size_t>(n), 0);
  const bool negative = c.a<attrs::index_select>().negative;
  for (int64_t j = 0; j < n; ++j) ids[size_t(j)] = check_index(load_index(idx, j), size, "index_select", negative);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(out + size_t(o * n + j) * rb, in + size_t(o * size + ids[size_t(j)]) * rb, rb);
}

void run_gather(const KernelCtx& c) {
  const TensorRef &x = c.in[0], &idx = c.in[1];
  int64_t d = c.a<attrs::gather>().dim;
  if (d < 0) d += x.rank();
  size_t es = dtype_size(x.dtype);
  std::vector<int64_t> xs = contiguous_strides(x.shape);
  int r = idx.rank();
  int64_t n = idx.numel();
  const bool negative = c.a<attrs::gather>().negative;
  if (r == 0) check_index(load_index(idx, 0), 1, "gather", negative);  // a 0-d input: one element, index 0
  std::vector<int64_t> pos(size_t(r), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int k = 0; k < r; ++k) {
      int64_t p = k == d ? check_index(load_index(idx, i), x.shape[size_t(k)], "gather", negative) : pos[size_t(k)];
      off += p * xs[size_t(k)];
    }
    std::memcpy(static_cast<char*>(c.out[0].data) + size_t(i) * es, static_cast<const char*>(x.data) + size_t(off) * es, es);
    for (int k = r - 1; k >= 0; --k) {
      if (++pos[size_t(k)] < idx.shape[size_t(k)]) break;
      pos[size_t(k)] = 0;
    }
  }
}

// out = x, then row ids[i] of out (dim 0) set to, or with accumulate increased by, row i of
// values, i in index order. Threads split the row's columns, so every column sums its
// contributions in index order whatever the thread count (eager's serial order).
void run_index_put(const KernelCtx& c) {
  const bool zeros = c.a<attrs::index_put>().zeros_rows.has_value();
  const TensorRef &idx = c.in[zeros ? 0 : 1], &v = c.in[zeros ? 1 : 2];
  TensorRef& o = c.out[0];
  size_t es = dtype_size(o.dtype);
  int64_t rows = o.shape[0], d = rows ? o.numel() / rows : 0, n = idx.numel();
  {
    char* out = static_cast<char*>(o.data);
    const char* src = zeros ? nullptr : static_cast<const char*>(c.in[0].data);
    const size_t rb = size_t(d) * es;
    parallel_for(rows, std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
      if (zeros) std::memset(out + size_t(lo) * rb, 0, size_t(hi - lo) * rb);
      else if (src != out) std::memcpy(out + size_t(lo) * rb, src + size_t(lo) * rb, size_t(hi - lo) * rb);
    });
  }
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = check_index(load_index(idx, i), rows, "index_put");
  if (d == 0 || n == 0) return;
  const bool accumulate = c.a<attrs::index_put>().accumulate;
  auto cols = [&](auto* out, const auto* val) {
    parallel_for(d, std::max<int64_t>(1, (1 << 14) / n), [&](int64_t lo, int64_t hi) {
      for (int64_t i = 0; i < n; ++i) {
        auto* dst = out + ids[size_t(i)] * d;
        const auto* src = val + i * d;
        if (accumulate)
          for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
        else
          for (int64_t j = lo; j < hi; ++j) dst[j] = src[j];
      }
    });
  };
  if (o.dtype == DType::f32) return cols(o.as<float>(), v.as<float>());
  if (o.dtype == DType::i64) return cols(o.as<int64_t>(), v.as<int64_t>());
  if (o.dtype == DType::i32) return cols(o.as<int32_t>(), v.as<int32_t>());
  ZENITH_CHECK(!accumulate, "index_put: accumulate on ", dtype_name(o.dtype));
  char* out = static_cast<char*>(o.data);
  const char* val = static_cast<const char*>(v.data);
  size_t rb = size_t(d) * es;
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + size_t(ids[size_t(i)]) * rb, val + size_t(i) * rb, rb);
}

// Advanced indexing, see infer_index for the output layout. Walks output positions,
// maps each to a source offset, and copies the trailing dims after the last indexed
// dim (when they stay trailing) as one block.
void run_index(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  TensorRef& o = c.out[0];
  const auto& dims = c.a<attrs::index>().dims;
  size_t k = dims.size();
  bool adjacent = true;
  for (size_t i = 1; i < k; ++i) adjacent = adjacent && dims[i] == dims[i - 1] + 1;
  // Broadcast shape of the indices and each index's strides within it.
  std::vector<int64_t> b;
  for (size_t i = 1; i <= k; ++i) {
    const auto& s = c.in[i].shape;
    if (s.size() > b.size()) b.insert(b.begin(), s.size() - b.size(), 1);
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& bd = b[b.size() - s.size() + d];
      if (bd == 1) bd = s[d];
    }
  }
  std::vector<std::vector<int64_t>> istr;
  for (size_t i = 1; i <= k; ++i) {
    const auto& s = c.in[i].shape;
    std::vector<int64_t> cs = contiguous_strides(s), st(b.size(), 0);
    for (size_t d = 0; d < s.size(); ++d) st[b.size() - s.size() + d] = s[d] == 1 ? 0 : cs[d];
    istr.push_back(st);
  }
  std::vector<int64_t> xs = contiguous_strides(x.shape);
  size_t es = dtype_size(x.dtype);
  // Output dims: which come from B and which from x's non-indexed dims.
  int r = x.rank();
  std::vector<int> src_dim;  // per output dim: x dim, or -1 - (position in B)
  if (adjacent) {
    for (int d = 0; d < dims.front(); ++d) src_dim.push_back(d);
    for (size_t j = 0; j < b.size(); ++j) src_dim.push_back(-1 - int(j));
    for (int d = int(dims.back()) + 1; d < r; ++d) src_dim.push_back(d);
  } else {
    for (size_t j = 0; j < b.size(); ++j) src_dim.push_back(-1 - int(j));
    for (int d = 0; d < r; ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) src_dim.push_back(d);
  }
  // Trailing x dims copied as one block.
  size_t nblock = 0;
  int64_t block = 1;
  while (nblock < src_dim.size() && src_dim[src_dim.size() - 1 - nblock] >= 0 &&
         src_dim[src_dim.size() - 1 - nblock] > int(dims.back())) {
    block *= x.shape[size_t(src_dim[src_dim.size() - 1 - nblock])];
    ++nblock;
  }
  size_t outer_rank = src_dim.size() - nblock;
  int64_t n_outer = 1;
  for (size_t d = 0; d < outer_rank; ++d) n_outer *= o.shape[d];
  if (o.numel() == 0) return;
  std::vector<int64_t> pos(outer_rank, 0), bpos(b.size(), 0);
  char* out = static_cast<char*>(o.data);
  const char* in = static_cast<const char*>(x.data);
  for (int64_t it = 0; it < n_outer; ++it) {
    int64_t off = 0;
    for (size_t d = 0; d < outer_rank; ++d) {
      if (src_dim[d] >= 0) off += pos[d] * xs[size_t(src_dim[d])];
      else bpos[size_t(-1 - src_dim[d])] = pos[d];
    }
    for (size_t i = 0; i < k; ++i) {
      int64_t e = 0;
      for (size_t j = 0; j < b.size(); ++j) e += bpos[j] * istr[i][j];
      int64_t v = check_index(load_index(c.in[i + 1], e), x.shape[size_t(dims[i])], "index");
      off += v * xs[size_t(dims[i])];
    }
    std::memcpy(out + size_t(it * block) * es, in + size_t(off) * es, size_t(block) * es);
    for (int d = int(outer_rank) - 1; d >= 0; --d) {
      if (++pos[size_t(d)] < o.shape[size_t(d)]) break;
      pos[size_t(d)] = 0;
    }
  }
}

void run_tril(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  int64_t diag = c.a<attrs::tril>().diagonal;
  bool upper = c.a<attrs::tril>().upper;
  int64_t R = x.shape[size_t(x.rank() - 2)], C = x.shape[size_t(x.rank() - 1)];
  size_t es = dtype_size(x.dtype);
  int64_t mats = (R * C != 0) ? x.numel() / (R * C) : 0;
  const char* in = static_cast<const char*>(x.data);
  char* out = static_cast<char*>(c.out[0].data);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) {
        size_t off = size_t((m * R + i) * C + j) * es;
        bool keep = upper ? (j - i >= diag) : (j - i <= diag);
        if (keep) std::memcpy(out + off, in + off, es);
        else std::memset(out + off, 0, es);
      }
}

void run_full(const KernelCtx& c) { fill_value(c.out[0].data, c.out[0].dtype, c.out[0].numel(), c.a<attrs::full>().value); }

void run_sym_value(const KernelCtx& c) {
  const int64_t v = c.a<attrs::sym_value>().value;  // the plan's value of the symbolic expression
  TensorRef& o = c.out[0];
  switch (o.dtype) {
    case DType::i64: *o.as<int64_t>() = v; break;
    case DType::i32:
      ZENITH_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(), "sym_value: ",
                   v, " does not fit in i32");
      *o.as<int32_t>() = int32_t(v);
      break;
    case DType::f32: *o.as<float>() = float(v); break;
    default: fail("sym_value: no kernel for dtype ", dtype_name(o.dtype));
  }
}

void run_arange(const KernelCtx& c) {
  TensorRef& o = c.out[0];
  double start = c.a<attrs::arange>().start, step = c.a<attrs::arange>().step;
  int64_t n = o.numel();
  switch (o.dtype) {
    case DType::i64:
      for (int64_t i = 0; i < n; ++i) o.as<int64_t>()[i] = int64_t(start) + i * int64_t(step);
      break;
    case DType::i32:
      for (int64_t i = 0; i < n; ++i) o.as<int32_t>()[i] = int32_t(int64_t(start) + i * int64_t(step));
      break;
    case DType::f32:
      for (int64_t i = 0; i < n; ++i) o.as<float>()[i] = float(start + double(i) * step);
      break;
    default: fail("arange: no kernel for dtype ", dtype_name(o.dtype));
  }
}

// ---- pooling (float32; (N)CHW) ----
namespace {
struct PoolGeom {
  int64_t planes, H, W, OH, OW;
};
PoolGeom geom(const TensorRef& x, const TensorRef& o) {
  int r = x.rank();
  PoolGeom g;
  g.H = x.shape[size_t(r - 2)];
  g.W = x.shape[size_t(r - 1)];
  g.OH = o.shape[size_t(r - 2)];
  g.OW = o.shape[size_t(r - 1)];
  g.planes = (g.H * g.W != 0) ? x.numel() / (g.H * g.W) : 0;
  return g;
}

struct MaxPoolParams {
  std::array<int64_t, 2> k, st, pd, dl;
};
// max_pool2d's attributes, or max_pool2d_nchwc's (the same ones).
template <class A = attrs::max_pool2d>
MaxPoolParams max_pool_params(const KernelCtx& c) {
  const auto& a = c.a<A>();
  return {a.kernel, a.stride, a.padding, a.dilation};
}
// The window's taps (t0 <= t < t1) along dim D (0 rows, 1 columns) of output index o that
// lie inside the input's n.
template <size_t D>
void pool_taps(const MaxPoolParams& q, int64_t o, int64_t n, int64_t* t0, int64_t* t1) {
  *t0 = 0;
  *t1 = q.k[D];
  while (*t0 < *t1 && o * q.st[D] - q.pd[D] + *t0 * q.dl[D] < 0) ++*t0;
  while (*t1 > *t0 && o * q.st[D] - q.pd[D] + (*t1 - 1) * q.dl[D] >= n) --*t1;
}
// max that keeps a NaN once it has seen one (PyTorch's max pooling propagates NaN)
inline float nan_max(float m, float v) { return (v > m || v != v) ? v : m; }

// Outputs [ow0, ow1) of a row whose windows lie inside the row of maxima t, each
// window's taps in order, in loops that vectorize along the row: a 3-wide undilated
// window (ResNet's, most pools) in one pass, others tap by tap. S is the stride as a
// constant (1, 2: strided loads become permutes) or 0 (run time).
template <int S>
void inner_windows(const float* t, const MaxPoolParams& q, int64_t ow0, int64_t ow1, float* orow) {
  const int64_t s = S > 0 ? S : q.st[1];
  const float* w = t - q.pd[1];
  if (q.k[1] == 3 && q.dl[1] == 1) {  // constant tap offsets: the three loads merge
    for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] = nan_max(nan_max(w[s * ow], w[s * ow + 1]), w[s * ow + 2]);
    return;
  }
  for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] = w[s * ow];
  for (int64_t kw = 1; kw < q.k[1]; ++kw) {
    const float* wk = w + kw * q.dl[1];
    for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] = nan_max(orow[ow], wk[s * ow]);
  }
}
}  // namespace

// Scalar reference: every output takes the max over the window's taps inside the input.
void ref_max_pool2d(const KernelCtx& c) {
  PoolGeom g = geom(c.in[0], c.out[0]);
  MaxPoolParams q = max_pool_params(c);
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* xi = c.in[0].as<float>() + p * g.H * g.W;
    float* oi = c.out[0].as<float>() + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      int64_t kh0, kh1;
      pool_taps<0>(q, oh, g.H, &kh0, &kh1);
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        float m = -INFINITY;
        for (int64_t kh = kh0; kh < kh1; ++kh)
          for (int64_t kw = 0; kw < q.k[1]; ++kw) {
            int64_t iw = ow * q.st[1] - q.pd[1] + kw * q.dl[1];
            if (iw >= 0 && iw < g.W) m = nan_max(m, xi[(oh * q.st[0] - q.pd[0] + kh * q.dl[0]) * g.W + iw]);
          }
        oi[oh * g.OW + ow] = m;
      }
    }
  }
}

// Per output row: the max down the window's rows first, along whole input rows (one
// vectorizable pass per kernel row), then across each window of that row of maxima.
// Windows inside the row skip the bounds checks.
void run_max_pool2d(const KernelCtx& c) {
  PoolGeom g = geom(c.in[0], c.out[0]);
  MaxPoolParams q = max_pool_params(c);
  parallel_for(g.planes, 1, [&](int64_t lo, int64_t hi) {
    thread_local std::vector<float> colmax;
    colmax.resize(size_t(g.W));
    float* t = colmax.data();
    for (int64_t p = lo; p < hi; ++p) {
      const float* xi = c.in[0].as<float>() + p * g.H * g.W;
      float* oi = c.out[0].as<float>() + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        int64_t kh0, kh1;
        pool_taps<0>(q, oh, g.H, &kh0, &kh1);
        std::fill_n(t, g.W, -INFINITY);
        for (int64_t kh = kh0; kh < kh1; ++kh) {
          const float* row = xi + (oh * q.st[0] - q.pd[0] + kh * q.dl[0]) * g.W;
          for (int64_t iw = 0; iw < g.W; ++iw) t[iw] = nan_max(t[iw], row[iw]);
        }
        float* orow = oi + oh * g.OW;
        auto edge = [&](int64_t ow) {  // a window that hangs over an edge: taps checked
          float m = -INFINITY;
          for (int64_t kw = 0; kw < q.k[1]; ++kw) {
            int64_t iw = ow * q.st[1] - q.pd[1] + kw * q.dl[1];
            if (iw >= 0 && iw < g.W) m = nan_max(m, t[iw]);
          }
          orow[ow] = m;
        };
        int64_t ow = 0;
        for (; ow < g.OW && ow * q.st[1] - q.pd[1] < 0; ++ow) edge(ow);
        int64_t end = ow;  // the windows inside the row
        while (end < g.OW && end * q.st[1] - q.pd[1] + (q.k[1] - 1) * q.dl[1] < g.W) ++end;
        if (q.st[1] == 1) inner_windows<1>(t, q, ow, end, orow);
        else if (q.st[1] == 2) inner_windows<2>(t, q, ow, end, orow);
        else inner_windows<0>(t, q, ow, end, orow);
        for (ow = end; ow < g.OW; ++ow) edge(ow);
      }
    }
  });
}

// max_pool2d_with_indices: each window's taps in order, keeping the first maximum (a
// later tap replaces it only when greater, or NaN: the last NaN), as PyTorch's CPU kernel
// does; the index starts at the window's first tap inside the input (all -inf: that one).
namespace {
// Output (oh, ow) of a plane: the window's taps inside it in order, the first maximum
// (or the last NaN) into *m, its index in the plane into *at.
void window_with_index(const float* xi, int64_t H, int64_t W, const MaxPoolParams& q, int64_t oh, int64_t ow, float* m,
                       int64_t* at) {
  int64_t kh0, kh1, kw0, kw1;
  pool_taps<0>(q, oh, H, &kh0, &kh1);
  pool_taps<1>(q, ow, W, &kw0, &kw1);
  const int64_t ih0 = oh * q.st[0] - q.pd[0], iw0 = ow * q.st[1] - q.pd[1];
  float v = -INFINITY;
  int64_t i = (ih0 + kh0 * q.dl[0]) * W + iw0 + kw0 * q.dl[1];
  for (int64_t kh = kh0; kh < kh1; ++kh)
    for (int64_t kw = kw0; kw < kw1; ++kw) {
      const int64_t t = (ih0 + kh * q.dl[0]) * W + iw0 + kw * q.dl[1];
      if (xi[t] > v || xi[t] != xi[t]) v = xi[t], i = t;
    }
  *m = v;
  *at = i;
}
}  // namespace

// The scalar reference: every output on its own.
void ref_max_pool2d_with_indices(const KernelCtx& c) {
  const PoolGeom g = geom(c.in[0], c.out[0]);
  const MaxPoolParams q = max_pool_params<attrs::max_pool2d_with_indices>(c);
  const float* x = c.in[0].as<float>();
  float* o = c.out[0].as<float>();
  int64_t* idx = c.out[1].as<int64_t>();
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t j = (p * g.OH + oh) * g.OW + ow;
        window_with_index(x + p * g.H * g.W, g.H, g.W, q, oh, ow, o + j, idx + j);
      }
}

namespace {
// Outputs [0, n) of a run of an output row whose windows lie inside the input's columns,
// the first window's first tap at x[first], taps in the reference's order (rows
// [kh0, kh1), then columns), each tap one pass along the run in a loop that vectorizes:
// the max and its index (int32, as the lanes of a float) side by side, selected together.
// S is the column stride as a constant (1, 2: strided loads become permutes) or 0.
template <int S>
void windows_with_indices(const float* x, int64_t W, const MaxPoolParams& q, int64_t first, int64_t kh0, int64_t kh1,
                          int64_t n, float* m, int32_t* at) {
  const int32_t s = int32_t(S > 0 ? S : q.st[1]);
  for (int64_t j = 0; j < n; ++j) {
    m[j] = -INFINITY;
    at[j] = int32_t(first + kh0 * q.dl[0] * W) + int32_t(j) * s;
  }
  for (int64_t kh = kh0; kh < kh1; ++kh)
    for (int64_t kw = 0; kw < q.k[1]; ++kw) {
      const int32_t off = int32_t(first + kh * q.dl[0] * W + kw * q.dl[1]);
      const float* r = x + off;
      for (int32_t j = 0; j < int32_t(n); ++j) {
        const float v = r[j * s];
        const bool take = v > m[j] || v != v;
        m[j] = take ? v : m[j];
        at[j] = take ? off + j * s : at[j];
      }
    }
}
}  // namespace

// Per output row: the windows that hang over the row's ends one by one (as the
// reference), the rest by windows_with_indices. Planes split across threads. Planes of
// 2^31 values or more go window by window (the runs keep int32 indices).
void run_max_pool2d_with_indices(const KernelCtx& c) {
  const PoolGeom g = geom(c.in[0], c.out[0]);
  const MaxPoolParams q = max_pool_params<attrs::max_pool2d_with_indices>(c);
  const float* x = c.in[0].as<float>();
  float* o = c.out[0].as<float>();
  int64_t* idx = c.out[1].as<int64_t>();
  // the windows inside the columns: [ow_in, ow_end)
  int64_t ow_in = 0;
  while (ow_in < g.OW && ow_in * q.st[1] - q.pd[1] < 0) ++ow_in;
  int64_t ow_end = ow_in;
  while (ow_end < g.OW && ow_end * q.st[1] - q.pd[1] + (q.k[1] - 1) * q.dl[1] < g.W) ++ow_end;
  if (g.H * g.W >= (int64_t(1) << 31)) ow_in = ow_end = g.OW;  // (one by one: the runs keep int32 indices)
  parallel_for(g.planes, 1, [&](int64_t lo, int64_t hi) {
    thread_local std::vector<float> mbuf;
    thread_local std::vector<int32_t> abuf;
    mbuf.resize(size_t(g.OW));
    abuf.resize(size_t(g.OW));
    for (int64_t p = lo; p < hi; ++p) {
      const float* xi = x + p * g.H * g.W;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        int64_t kh0, kh1;
        pool_taps<0>(q, oh, g.H, &kh0, &kh1);
        const int64_t ih0 = oh * q.st[0] - q.pd[0];
        float* orow = o + (p * g.OH + oh) * g.OW;
        int64_t* irow = idx + (p * g.OH + oh) * g.OW;
        auto edge = [&](int64_t ow) { window_with_index(xi, g.H, g.W, q, oh, ow, orow + ow, irow + ow); };
        for (int64_t ow = 0; ow < ow_in; ++ow) edge(ow);
        const int64_t n = ow_end - ow_in;
        if (n > 0) {
          const int64_t first = ih0 * g.W + ow_in * q.st[1] - q.pd[1];
          if (q.st[1] == 1) windows_with_indices<1>(xi, g.W, q, first, kh0, kh1, n, mbuf.data(), abuf.data());
          else if (q.st[1] == 2) windows_with_indices<2>(xi, g.W, q, first, kh0, kh1, n, mbuf.data(), abuf.data());
          else windows_with_indices<0>(xi, g.W, q, first, kh0, kh1, n, mbuf.data(), abuf.data());
          std::copy_n(mbuf.data(), n, orow + ow_in);
          for (int64_t j = 0; j < n; ++j) irow[ow_in + j] = abuf[size_t(j)];
        }
        for (int64_t ow = std::max(ow_end, ow_in); ow < g.OW; ++ow) edge(ow);
      }
    }
  });
}

// max_pool2d_backward: dx zeroed, then each output's gradient added at its index, plane
// by plane (a plane's sums in output order; planes split across threads). An index
// outside its plane is an error, not a write elsewhere.
void run_max_pool2d_backward(const KernelCtx& c) {
  const PoolGeom g = geom(c.in[1], c.in[0]);
  const float* gy = c.in[0].as<float>();
  const int64_t* idx = c.in[2].as<int64_t>();
  float* dx = c.out[0].as<float>();
  const int64_t plane = g.H * g.W, oplane = g.OH * g.OW;
  std::atomic<bool> any_bad{false};
  std::atomic<int64_t> bad{0};
  parallel_for(g.planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      float* d = dx + p * plane;
      std::fill_n(d, plane, 0.0f);
      for (int64_t j = 0; j < oplane; ++j) {
        const int64_t i = idx[p * oplane + j];
        if (i < 0 || i >= plane) {
          bad.store(i);
          any_bad.store(true);
          continue;
        }
        d[i] += gy[p * oplane + j];
      }
    }
  });
  ZENITH_CHECK(!any_bad.load(), "max_pool2d_backward: index ", bad.load(), " outside an input plane of ", plane);
}

// ---- max_pool2d over the blocked layout [N, CB, H, W, L] ----
namespace {
struct BlockedPool {
  int64_t planes, H, W, OH, OW, L;  // planes: N * CB
};
BlockedPool blocked_pool(const KernelCtx& c) {
  const TensorRef &x = c.in[0], &o = c.out[0];
  return {x.shape[0] * x.shape[1], x.shape[2], x.shape[3], o.shape[2], o.shape[3], x.shape[4]};
}
// Output rows [r0, r1) of (plane, row) items: each output pixel's L channels as NV
// vectors of 8 held in registers, the window's taps inside the input in max_pool2d's
// order, a NaN kept once seen (nan_max lane by lane: compare, or, blend).
template <int NV>
void max_pool_nchwc_rows(const BlockedPool& b, const MaxPoolParams& q, const float* x, float* out, int64_t r0,
                         int64_t r1) {
  using gemm_detail::v8f;
  constexpr int64_t L = 8 * NV;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t p = r / b.OH, oh = r % b.OH;
    int64_t kh0, kh1;
    pool_taps<0>(q, oh, b.H, &kh0, &kh1);
    const float* xp = x + p * b.H * b.W * L;
    float* orow = out + (p * b.OH + oh) * b.OW * L;
    for (int64_t ow = 0; ow < b.OW; ++ow) {
      int64_t kw0, kw1;
      pool_taps<1>(q, ow, b.W, &kw0, &kw1);
      v8f m[NV];
      for (int j = 0; j < NV; ++j) m[j] = v8f{} - INFINITY;
      const int64_t iw0 = ow * q.st[1] - q.pd[1] + kw0 * q.dl[1];  // the first tap inside the row
      for (int64_t kh = kh0; kh < kh1; ++kh) {
        const float* xr = xp + ((oh * q.st[0] - q.pd[0] + kh * q.dl[0]) * b.W + iw0) * L;
        for (int64_t kw = kw0; kw < kw1; ++kw)
          for (int j = 0; j < NV; ++j) {
            const v8f v = gemm_detail::load8(xr + (kw - kw0) * q.dl[1] * L + 8 * j);
            m[j] = ((v > m[j]) | (v != v)) ? v : m[j];
          }
      }
      for (int j = 0; j < NV; ++j) gemm_detail::store8(orow + ow * L + 8 * j, m[j]);
    }
  }
}
}  // namespace

// Scalar reference: every output channel of every pixel the max over the window's taps
// inside the input, one value at a time.
void ref_max_pool2d_nchwc(const KernelCtx& c) {
  const BlockedPool b = blocked_pool(c);
  const MaxPoolParams q = max_pool_params<attrs::max_pool2d_nchwc>(c);
  const float* x = c.in[0].as<float>();
  float* o = c.out[0].as<float>();
  for (int64_t p = 0; p < b.planes; ++p)
    for (int64_t oh = 0; oh < b.OH; ++oh)
      for (int64_t ow = 0; ow < b.OW; ++ow)
        for (int64_t l = 0; l < b.L; ++l) {
          float m = -INFINITY;
          for (int64_t kh = 0; kh < q.k[0]; ++kh)
            for (int64_t kw = 0; kw < q.k[1]; ++kw) {
              const int64_t ih = oh * q.st[0] - q.pd[0] + kh * q.dl[0], iw = ow * q.st[1] - q.pd[1] + kw * q.dl[1];
              if (ih >= 0 && ih < b.H && iw >= 0 && iw < b.W) m = nan_max(m, x[((p * b.H + ih) * b.W + iw) * b.L + l]);
            }
          o[((p * b.OH + oh) * b.OW + ow) * b.L + l] = m;
        }
}

void run_max_pool2d_nchwc(const KernelCtx& c) {
  const BlockedPool b = blocked_pool(c);
  const MaxPoolParams q = max_pool_params<attrs::max_pool2d_nchwc>(c);
  const float* x = c.in[0].as<float>();
  float* o = c.out[0].as<float>();
  ZENITH_CHECK(b.L == 8 || b.L == 16, "max_pool2d_nchwc: block ", b.L, " is not 8 or 16");
  parallel_for(b.planes * b.OH, 1, [&](int64_t lo, int64_t hi) {
    if (b.L == 16) max_pool_nchwc_rows<2>(b, q, x, o, lo, hi);
    else max_pool_nchwc_rows<1>(b, q, x, o, lo, hi);
  });
}

// ---- max_pool2d over int8 codes [N, H, W, C] (chain_int8, between int8 convs) ----
// Each window's largest code, or -128 where a tap holds -128 (the mark of a NaN or an
// infinity; a window with no tap in the image gives -128 too, -inf's code). chain_int8
// pools codes only after a ReLU, whose results quantize monotonically (codes 0..127 or
// the mark) and hold no -inf: the max code is then the code of the float pool's max, and
// a NaN or +inf in a window, which the float pool keeps, is the mark either way.
namespace {
struct CodesPool {
  int64_t N, H, W, C, OH, OW;
};
CodesPool codes_pool(const KernelCtx& c) {
  const TensorRef &x = c.in[0], &o = c.out[0];
  return {x.shape[0], x.shape[1], x.shape[2], x.shape[3], o.shape[1], o.shape[2]};
}
}  // namespace

void ref_max_pool2d_codes(const KernelCtx& c) {
  const CodesPool b = codes_pool(c);
  const MaxPoolParams q = max_pool_params<attrs::max_pool2d_codes>(c);
  const int8_t* x = c.in[0].as<int8_t>();
  int8_t* o = c.out[0].as<int8_t>();
  for (int64_t n = 0; n < b.N; ++n)
    for (int64_t oh = 0; oh < b.OH; ++oh)
      for (int64_t ow = 0; ow < b.OW; ++ow)
        for (int64_t ch = 0; ch < b.C; ++ch) {
          int m = -128;
          bool mark = false;
          for (int64_t kh = 0; kh < q.k[0]; ++kh)
            for (int64_t kw = 0; kw < q.k[1]; ++kw) {
              const int64_t ih = oh * q.st[0] - q.pd[0] + kh * q.dl[0], iw = ow * q.st[1] - q.pd[1] + kw * q.dl[1];
              if (ih < 0 || ih >= b.H || iw < 0 || iw >= b.W) continue;
              const int v = x[((n * b.H + ih) * b.W + iw) * b.C + ch];
              mark = mark || v == -128;
              m = std::max(m, v);
            }
          o[((n * b.OH + oh) * b.OW + ow) * b.C + ch] = int8_t(mark ? -128 : m);
        }
}

// Output rows split across threads; each output pixel's channels 32 at a time (AVX2:
// vpmaxsb, the marks or-ed from vpcmpeqb, one blend), the last C % 32 one by one.
void run_max_pool2d_codes(const KernelCtx& c) {
  const CodesPool b = codes_pool(c);
  const MaxPoolParams q = max_pool_params<attrs::max_pool2d_codes>(c);
  const int8_t* x = c.in[0].as<int8_t>();
  int8_t* o = c.out[0].as<int8_t>();
  parallel_for(b.N * b.OH, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t n = r / b.OH, oh = r % b.OH;
      int64_t kh0, kh1;
      pool_taps<0>(q, oh, b.H, &kh0, &kh1);
      for (int64_t ow = 0; ow < b.OW; ++ow) {
        int64_t kw0, kw1;
        pool_taps<1>(q, ow, b.W, &kw0, &kw1);
        int8_t* out = o + ((n * b.OH + oh) * b.OW + ow) * b.C;
        auto tap = [&](int64_t kh, int64_t kw) {
          return x + ((n * b.H + oh * q.st[0] - q.pd[0] + kh * q.dl[0]) * b.W + ow * q.st[1] - q.pd[1] +
                      kw * q.dl[1]) * b.C;
        };
        int64_t ch = 0;
#if defined(__AVX2__)
        const __m256i low = _mm256_set1_epi8(-128);
        for (; ch + 32 <= b.C; ch += 32) {
          __m256i m = low, mark = _mm256_setzero_si256();
          for (int64_t kh = kh0; kh < kh1; ++kh)
            for (int64_t kw = kw0; kw < kw1; ++kw) {
              const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tap(kh, kw) + ch));
              mark = _mm256_or_si256(mark, _mm256_cmpeq_epi8(v, low));
              m = _mm256_max_epi8(m, v);
            }
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + ch), _mm256_blendv_epi8(m, low, mark));
        }
#endif
        for (; ch < b.C; ++ch) {
          int m = -128;
          bool mark = false;
          for (int64_t kh = kh0; kh < kh1; ++kh)
            for (int64_t kw = kw0; kw < kw1; ++kw) {
              const int v = tap(kh, kw)[ch];
              mark = mark || v == -128;
              m = std::max(m, v);
            }
          out[ch] = int8_t(mark ? -128 : m);
        }
      }
    }
  });
}

void run_avg_pool2d(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  PoolGeom g = geom(x, c.out[0]);
  const auto& a = c.a<attrs::avg_pool2d>();
  const auto &k = a.kernel, &st = a.stride, &pd = a.padding;
  bool include_pad = a.count_include_pad;
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* xi = x.as<float>() + p * g.H * g.W;
    float* oi = c.out[0].as<float>() + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        int64_t h0 = oh * st[0] - pd[0], w0 = ow * st[1] - pd[1];
        int64_t h1 = std::min(h0 + k[0], g.H + pd[0]), w1 = std::min(w0 + k[1], g.W + pd[1]);
        int64_t area = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, g.H);
        w1 = std::min(w1, g.W);
        if (!include_pad) area = (h1 - h0) * (w1 - w0);
        double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += xi[ih * g.W + iw];
        oi[oh * g.OW + ow] = float(s / double(area));
      }
  }
}

void run_adaptive_avg_pool2d(const KernelCtx& c) {
  const TensorRef& x = c.in[0];
  PoolGeom g = geom(x, c.out[0]);
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* xi = x.as<float>() + p * g.H * g.W;
    float* oi = c.out[0].as<float>() + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      int64_t h0 = oh * g.H / g.OH, h1 = ((oh + 1) * g.H + g.OH - 1) / g.OH;
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        int64_t w0 = ow * g.W / g.OW, w1 = ((ow + 1) * g.W + g.OW - 1) / g.OW;
        double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += xi[ih * g.W + iw];
        oi[oh * g.OW + ow] = float(s / double((h1 - h0) * (w1 - w0)));
      }
    }
  }
}

}  // namespace zenith
