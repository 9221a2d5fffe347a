// Bindings of the quantized kernels (kernels/quant.h) for eager execution and tests:
// the format table, the reference dequantizer, qmatmul and qembedding. Arguments are
// checked here (TypeError for a wrong dtype, ValueError for a shape, a layout or a
// format name, IndexError for an id out of range) so the kernels only see what they
// accept; the GIL is released while they run. Outputs are torch tensors that own
// Zenith's buffers (no copy).
#include <cstdlib>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "convert.h"
#include "zenith/kernels/quant.h"

namespace zenith::py {

namespace {

using nb::dlpack::dtype_code;

QFormat format_of(const std::string& name) {
  QFormat f;
  if (parse_qformat(name, &f)) return f;
  std::string known;
#define QFORMAT(n, elems, bytes) known += (known.empty() ? "" : ", ") + std::string(#n);
#include "zenith/quant_formats.def"
#undef QFORMAT
  throw nb::value_error(("unknown quantized format '" + name + "' (known: " + known + ")").c_str());
}

bool is(const CpuArray& a, dtype_code code, int bits) {
  return a.dtype().code == uint8_t(code) && a.dtype().bits == bits && a.dtype().lanes == 1;
}

// A dense row-major array of the given dtype, else TypeError / ValueError naming `what`.
void require(const CpuArray& a, const char* what, dtype_code code, int bits, const char* dtype) {
  if (!is(a, code, bits)) throw nb::type_error((std::string(what) + " must be a " + dtype + " tensor").c_str());
  try {
    require_contiguous(a, what);
  } catch (const Error& e) {
    throw nb::value_error(e.what());
  }
}

// A weight: u8 [rows, row_bytes] whose rows are a whole number of the format's blocks.
// Returns K, the values per row.
int64_t weight_k(const CpuArray& w, QFormat f) {
  require(w, "w", dtype_code::UInt, 8, "uint8");
  if (w.ndim() != 2) throw nb::value_error(("w must be 2-D [rows, row_bytes], got " + std::to_string(w.ndim()) + "-D").c_str());
  const int64_t rb = int64_t(w.shape(1)), K = qformat_row_elems(f, rb);
  if (K < 0) {
    const QFormatInfo& q = qformat_info(f);
    throw nb::value_error(("w has " + std::to_string(rb) + " bytes per row, not a whole number of " + q.name +
                           " blocks (" + std::to_string(q.block_bytes) + " bytes" +
                           (q.block_elems ? "" : " of scale, then one byte per value") + ")")
                              .c_str());
  }
  return K;
}

std::shared_ptr<void> alloc_floats(int64_t n) {
  const size_t bytes = (size_t(std::max<int64_t>(n, 1)) * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) fail_alloc("zenith: out of memory allocating a ", bytes, "-byte output");
  return std::shared_ptr<void>(p, std::free);
}

}  // namespace

void init_quant(nb::module_& m) {
  m.def(
      "quant_formats",
      [] {
        nb::dict d;
#define QFORMAT(n, elems, bytes) d[#n] = nb::make_tuple(int64_t(elems), int64_t(bytes));
#include "zenith/quant_formats.def"
#undef QFORMAT
        return d;
      },
      "The quantized weight formats: name -> (block_elems, block_bytes). int8's block is the whole row: "
      "(0, 4), its 4 bytes the row's f32 scale.");
  m.def("qmatmul_isa", [] { return std::string(qisa_name(qisa_default())); },
        "The instruction set qmatmul's dot products run on this CPU ('avx2' or 'scalar').");
  m.def(
      "qdequantize",
      [](const CpuArray& w, const std::string& format) {
        const QFormat f = format_of(format);
        const int64_t K = weight_k(w, f), N = int64_t(w.shape(0));
        auto out = alloc_floats(N * K);
        {
          nb::gil_scoped_release nogil;
          qdequantize(f, static_cast<const uint8_t*>(w.data()), N, int64_t(w.shape(1)), static_cast<float*>(out.get()));
        }
        return to_torch(out, out.get(), DType::f32, {N, K});
      },
      nb::arg("w"), nb::arg("format"),
      "dequant(w): a float32 tensor [rows, K] from a uint8 weight [rows, row_bytes], by the scalar reference.");
  m.def(
      "qmatmul",
      [](const CpuArray& x, const CpuArray& w, const std::string& format, std::optional<CpuArray> bias) {
        const QFormat f = format_of(format);
        const int64_t K = weight_k(w, f), N = int64_t(w.shape(0));
        require(x, "x", dtype_code::Float, 32, "float32");
        if (x.ndim() < 1 || int64_t(x.shape(x.ndim() - 1)) != K)
          throw nb::value_error(("x must be [..., K] with K = " + std::to_string(K) + " (the " + format +
                                 " weight's values per row), got last dim " +
                                 (x.ndim() ? std::to_string(x.shape(x.ndim() - 1)) : std::string("none")))
                                    .c_str());
        const float* b = nullptr;
        if (bias) {
          require(*bias, "bias", dtype_code::Float, 32, "float32");
          if (bias->ndim() != 1 || int64_t(bias->shape(0)) != N)
            throw nb::value_error(("bias must be [" + std::to_string(N) + "] (one value per row of w)").c_str());
          b = static_cast<const float*>(bias->data());
        }
        std::vector<int64_t> shape;
        int64_t M = 1;
        for (size_t d = 0; d + 1 < x.ndim(); ++d) {
          shape.push_back(int64_t(x.shape(d)));
          M *= int64_t(x.shape(d));
        }
        shape.push_back(N);
        auto out = alloc_floats(M * N);
        {
          nb::gil_scoped_release nogil;
          qmatmul(qmatmul_plan(f, M, N, K), static_cast<const float*>(x.data()), static_cast<const uint8_t*>(w.data()),
                  b, static_cast<float*>(out.get()));
        }
        return to_torch(out, out.get(), DType::f32, shape);
      },
      nb::arg("x"), nb::arg("w"), nb::arg("format"), nb::arg("bias") = nb::none(),
      "x @ dequant(w)^T (+ bias): x float32 [..., K], w uint8 [N, row_bytes], bias float32 [N] or None; a "
      "float32 tensor [..., N]. The kernel the runtime runs (threaded; x quantized per block on the fly).");
  m.def(
      "qembedding",
      [](const CpuArray& w, const CpuArray& ids, const std::string& format) {
        const QFormat f = format_of(format);
        const int64_t K = weight_k(w, f), V = int64_t(w.shape(0));
        const bool i64 = is(ids, dtype_code::Int, 64);
        if (!i64 && !is(ids, dtype_code::Int, 32)) throw nb::type_error("ids must be an int64 or int32 tensor");
        require(ids, "ids", dtype_code::Int, i64 ? 64 : 32, "int64");
        std::vector<int64_t> shape;
        int64_t n = 1;
        for (size_t d = 0; d < ids.ndim(); ++d) {
          shape.push_back(int64_t(ids.shape(d)));
          n *= int64_t(ids.shape(d));
        }
        shape.push_back(K);
        auto out = alloc_floats(n * K);
        std::string bad;
        {
          nb::gil_scoped_release nogil;
          try {
            qembedding(f, static_cast<const uint8_t*>(w.data()), V, int64_t(w.shape(1)), ids.data(),
                       i64 ? DType::i64 : DType::i32, n, static_cast<float*>(out.get()));
          } catch (const Error& e) {
            bad = e.what();
          }
        }
        if (!bad.empty()) throw nb::index_error(bad.c_str());
        return to_torch(out, out.get(), DType::f32, shape);
      },
      nb::arg("w"), nb::arg("ids"), nb::arg("format"),
      "Rows of dequant(w): w uint8 [V, row_bytes], ids int64 (or int32) of any shape; a float32 tensor "
      "[*ids.shape, K]. An id outside [0, V) raises IndexError.");
}

}  // namespace zenith::py
