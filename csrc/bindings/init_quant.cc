// Bindings of the quantized kernels (kernels/quant.h) for eager execution and tests:
// the format table, the reference dequantizer, qmatmul and qembedding. Arguments are
// checked here (TypeError for a wrong dtype, ValueError for a shape, a layout or a
// format name, IndexError for an id out of range) so the kernels only see what they
// accept; the GIL is released while they run. Outputs are torch tensors that own
// Zenith's buffers (no copy).
#include <cmath>
#include <cstdlib>
#include <string>

#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "convert.h"
#include "zenith/kernels/quant.h"
#include "zenith/weight_memory.h"

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

QIsa parse_qisa(const std::string& name) {
  for (QIsa isa : {QIsa::kScalar, QIsa::kAvx2, QIsa::kAvxVnni, QIsa::kAvx512})
    if (name == qisa_name(isa)) return isa;
  throw nb::value_error(("unknown isa '" + name + "' (scalar, avx2, avxvnni, avx512vnni)").c_str());
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
      "weight_buffer",
      [](int64_t nbytes) {
        if (nbytes < 0) throw nb::value_error("weight_buffer: a negative size");
        std::shared_ptr<void> mem = alloc_weight_memory(size_t(nbytes));
        void* data = mem.get();
        return to_torch(std::move(mem), data, DType::u8, {nbytes});
      },
      nb::arg("nbytes"),
      "An uninitialised uint8 tensor of nbytes for a weight kernels stream from memory: from 2 MiB on, its own "
      "mapping, 2 MiB-aligned, asked for 2 MiB pages (Linux THP), which spare a decode step's TLB walks.");
  m.attr("LARGE_PAGE_BYTES") = kLargePageBytes;
  m.def("release_free_heap", [] { release_free_heap(); },
        "Returns the heap's free memory to the system (glibc malloc_trim), as zenith.quantize does at its end.");
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
  m.def(
      "qmatmul_isa",
      [](std::optional<std::string> format, int64_t rows, int64_t k) {
        if (!format) return std::string(qisa_name(qisa_default()));
        QFormat f;
        if (!parse_qformat(*format, &f)) throw nb::value_error(("unknown quantized format " + *format).c_str());
        if (rows < 1 || k < 1) throw nb::value_error("qmatmul_isa: rows and k must be positive");
        return std::string(qisa_name(qisa_for(f, rows, k)));
      },
      nb::arg("format") = nb::none(), nb::arg("rows") = 1, nb::arg("k") = 1024,
      "The instruction set qmatmul plans for on this CPU ('avx512vnni', 'avxvnni', 'avx2' or 'scalar'); with a format, the "
      "one it plans that format for with `rows` rows of x of `k` values (the 4-bit nibble formats: on AMD Zen 4 AVX2, "
      "except q4_0 / int4_g64 / int4_g128 from 12 rows (AVX-512's lanes GEMM); "
      "on other AVX-512 CPUs, AVX-VNNI or AVX2 below 8 rows from k 4096). A format without kernels of that set runs "
      "its AVX2 ones.");
  m.def(
      "qmatmul_isa_supported", [](const std::string& name) { return qisa_supported(parse_qisa(name)); },
      nb::arg("isa"), "Whether this CPU runs qmatmul's kernels of `isa` ('scalar', 'avx2', 'avxvnni', 'avx512vnni').");
  // The plan qmatmul makes for `rows` rows of one block's K in format f (the three questions below ask it).
  const auto probe = [](QFormat f, int64_t rows, float x_scale, bool row_scale) {
    const int64_t K = std::max<int64_t>(qformat_info(f).block_elems, 32);
    return qmatmul_plan(f, rows, 1, K, qisa_for(f, rows, K), x_scale, false, row_scale);
  };
  m.def(
      "qmatmul_act_max",
      [probe](const std::string& format, int64_t rows, float x_scale) {
        return probe(format_of(format), rows, x_scale, false).act_max;
      },
      nb::arg("format"), nb::arg("rows"), nb::arg("x_scale") = 0.0f,
      "The largest activation code qmatmul writes for `rows` rows of x in `format` on this CPU: 127, or 63 where "
      "AVX2's int8 GEMM runs (int8 weights, 8 or more rows, dynamic activations; eager calls use the same codes).");
  m.def(
      "qmatmul_act_block",
      [probe](const std::string& format, int64_t rows, bool row_scale) {
        const QMatmulPlan p = probe(format_of(format), rows, 0.0f, row_scale);
        return p.row_scale || p.act == quant::ActKind::kF32 ? int64_t(0) : quant::act_block(p.act) * p.act_group;
      },
      nb::arg("format"), nb::arg("rows"), nb::arg("row_scale") = false,
      "How many values of x share one activation scale when qmatmul quantizes `rows` rows of dynamic activations "
      "in `format` on this CPU, for rows of one block's K (qmatmul_isa's choice of kernels for such rows): 32; 64 "
      "with row_scale (int8-dynamic) on AVX2 from 8 rows; 256 for the k-quants; 0 where each row has one scale "
      "(row_scale on AVX-512 VNNI and the scalar build) or x is read in float (nf4).");
  m.def(
      "qmatmul_row_scales",
      [probe] { return probe(QFormat::int8, 8, 0.0f, true).row_scale != nullptr; },
      "Whether qmatmul's row_scale (int8-dynamic's linear layers) quantizes each row of x on one scale on this CPU: "
      "AVX-512 VNNI and the scalar reference do; AVX2 and AVX-VNNI keep a scale per block (qmatmul_act_block).");
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
      [](const CpuArray& x, const CpuArray& w, const std::string& format, std::optional<CpuArray> bias,
         std::optional<float> x_scale, bool row_scale, std::optional<CpuArray> x_mul) {
        const QFormat f = format_of(format);
        if (x_scale && !(f == QFormat::int8 && *x_scale > 0.0f && std::isfinite(*x_scale)))
          throw nb::value_error("x_scale needs int8 weights and a positive finite value");
        if (row_scale && !(f == QFormat::int8 && !x_scale))
          throw nb::value_error("row_scale (one activation scale per row) needs int8 weights and no x_scale");
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
        const float* mul = nullptr;
        if (x_mul) {
          if (!x_scale) throw nb::value_error("x_mul needs static INT8 activations (x_scale)");
          require(*x_mul, "x_mul", dtype_code::Float, 32, "float32");
          if (x_mul->ndim() != 1 || int64_t(x_mul->shape(0)) != K)
            throw nb::value_error(("x_mul must be [" + std::to_string(K) + "] (one value per channel of x)").c_str());
          mul = static_cast<const float*>(x_mul->data());
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
          qmatmul(qmatmul_plan(f, M, N, K, qisa_for(f, M, K), x_scale.value_or(0.0f), false, row_scale),
                  static_cast<const float*>(x.data()), static_cast<const uint8_t*>(w.data()), b,
                  static_cast<float*>(out.get()), nullptr, Activation::kNone, mul);
        }
        return to_torch(out, out.get(), DType::f32, shape);
      },
      nb::arg("x"), nb::arg("w"), nb::arg("format"), nb::arg("bias") = nb::none(), nb::arg("x_scale") = nb::none(),
      nb::arg("row_scale") = false, nb::arg("x_mul") = nb::none(),
      "x @ dequant(w)^T (+ bias): x float32 [..., K], w uint8 [N, row_bytes], bias float32 [N] or None; a "
      "float32 tensor [..., N]. The kernel the runtime runs (threaded; x quantized per block on the fly, or on "
      "x_scale for int8 weights: static INT8, with x_mul float32 [K] multiplying each row of x per channel as it "
      "is quantized; or with row_scale on one scale per row: dynamic INT8 per token).");
  m.def(
      "qconv2d",
      [](const CpuArray& x, const CpuArray& w, std::optional<CpuArray> bias, std::array<int64_t, 2> kernel,
         std::array<int64_t, 2> stride, std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation,
         std::optional<float> x_scale, std::optional<std::string> isa_name) {
        require(x, "x", dtype_code::Float, 32, "float32");
        const int64_t K = weight_k(w, QFormat::int8);
        if (x.ndim() != 4) throw nb::value_error("x must be NCHW (4-D)");
        Conv2dInt8Geom g;
        g.N = int64_t(x.shape(0)), g.C = int64_t(x.shape(1)), g.H = int64_t(x.shape(2)), g.W = int64_t(x.shape(3));
        g.OC = int64_t(w.shape(0)), g.KH = kernel[0], g.KW = kernel[1];
        g.st = stride, g.pd = padding, g.dl = dilation;
        for (int i = 0; i < 2; ++i)
          if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1 || padding[i] < 0)
            throw nb::value_error("kernel, stride and dilation must be positive and padding not negative");
        if (g.K() != K)
          throw nb::value_error(("w has " + std::to_string(K) + " codes per row; " + std::to_string(g.C) +
                                 " channels x kernel " + std::to_string(g.KH) + "x" + std::to_string(g.KW) + " need " +
                                 std::to_string(g.K()))
                                    .c_str());
        g.OH = (g.H + 2 * g.pd[0] - g.dl[0] * (g.KH - 1) - 1) / g.st[0] + 1;
        g.OW = (g.W + 2 * g.pd[1] - g.dl[1] * (g.KW - 1) - 1) / g.st[1] + 1;
        if (g.OH < 1 || g.OW < 1) throw nb::value_error("the kernel is larger than the padded input");
        if (x_scale && !(*x_scale > 0.0f && std::isfinite(*x_scale)))
          throw nb::value_error("x_scale must be a positive finite number");
        GemmEpilogue ep;
        if (bias) {
          require(*bias, "bias", dtype_code::Float, 32, "float32");
          if (bias->ndim() != 1 || int64_t(bias->shape(0)) != g.OC)
            throw nb::value_error(("bias must be [" + std::to_string(g.OC) + "]").c_str());
          ep.row_shift = static_cast<const float*>(bias->data());
        }
        QIsa isa = qisa_default();
        if (isa_name) {
          isa = parse_qisa(*isa_name);
          if (!qisa_supported(isa)) throw nb::value_error(("this CPU has no " + *isa_name).c_str());
        }
        auto out = alloc_floats(g.N * g.OC * g.OH * g.OW);
        {
          nb::gil_scoped_release nogil;
          const PackedOperand packed = conv2d_int8_pack(g, static_cast<const uint8_t*>(w.data()), isa);
          conv2d_int8(g, isa, static_cast<const float*>(x.data()), packed, x_scale, ep, nullptr,
                      static_cast<float*>(out.get()));
        }
        return to_torch(out, out.get(), DType::f32, {g.N, g.OC, g.OH, g.OW});
      },
      nb::arg("x"), nb::arg("w"), nb::arg("bias").none(), nb::arg("kernel"), nb::arg("stride"), nb::arg("padding"),
      nb::arg("dilation"), nb::arg("x_scale").none(), nb::arg("isa") = nb::none(),
      "conv2d of float32 NCHW x with int8 filters w (uint8 int8 rows [OC, 4 + C * KH * KW]) and int8 activations: "
      "x_scale their scale (static), or None for max|x| / 127 per image (dynamic). One group. isa: 'scalar', "
      "'avx2', 'avxvnni' or 'avx512vnni' (default: the best this CPU has). The kernel the runtime runs.");
  m.def(
      "linear",
      [](const CpuArray& x, const CpuArray& w, std::optional<CpuArray> bias) {
        require(x, "x", dtype_code::Float, 32, "float32");
        require(w, "w", dtype_code::Float, 32, "float32");
        if (x.ndim() != 2 || w.ndim() != 2 || x.shape(1) != w.shape(1))
          throw nb::value_error("x must be [M, K] and w [N, K]");
        const int64_t M = int64_t(x.shape(0)), K = int64_t(x.shape(1)), N = int64_t(w.shape(0));
        GemmEpilogue ep;
        if (bias) {
          require(*bias, "bias", dtype_code::Float, 32, "float32");
          if (bias->ndim() != 1 || int64_t(bias->shape(0)) != N)
            throw nb::value_error(("bias must be [" + std::to_string(N) + "]").c_str());
          ep.col_shift = static_cast<const float*>(bias->data());
        }
        auto out = alloc_floats(M * N);
        {
          nb::gil_scoped_release nogil;
          // B = w^T: B[k][n] = w[n * K + k]
          sgemm(M, N, K, 1.0f, static_cast<const float*>(x.data()), K, 1, static_cast<const float*>(w.data()), 1, K,
                static_cast<float*>(out.get()), N, false, nullptr, bias ? &ep : nullptr);
        }
        return to_torch(out, out.get(), DType::f32, {M, N});
      },
      nb::arg("x"), nb::arg("w"), nb::arg("bias").none(),
      "x [M, K] @ w [N, K]^T (+ bias [N]) in float32 by Zenith's SGEMM: static INT8 calibration's forward passes "
      "(zenith.quant.calibrate.zenith_linears).");
  m.def(
      "abs_stats",
      [](const CpuArray& x) {
        require(x, "x", dtype_code::Float, 32, "float32");
        AbsStats s;
        {
          nb::gil_scoped_release nogil;
          s = abs_stats(static_cast<const float*>(x.data()), int64_t(x.size()));
        }
        return nb::make_tuple(double(s.amax), s.zeros, s.nonfinite);
      },
      nb::arg("x"),
      "(max finite |x|, exact zeros, NaNs and infinities) of a float32 tensor: static INT8 calibration's statistics.");
  m.def(
      "abs_histogram",
      [](const CpuArray& x, double range, int64_t bins) {
        require(x, "x", dtype_code::Float, 32, "float32");
        if (!(range > 0.0 && std::isfinite(range))) throw nb::value_error("range must be a positive finite number");
        if (bins < 1 || bins > (int64_t(1) << 24)) throw nb::value_error("bins must be in [1, 2^24]");
        auto out = alloc_floats(bins * 2);  // int64 counts
        {
          nb::gil_scoped_release nogil;
          abs_histogram(static_cast<const float*>(x.data()), int64_t(x.size()), range, bins,
                        static_cast<int64_t*>(out.get()));
        }
        return to_torch(out, out.get(), DType::i64, {bins});
      },
      nb::arg("x"), nb::arg("range"), nb::arg("bins"),
      "int64 [bins]: the finite nonzero |x| of a float32 tensor counted in bins of width range / bins "
      "(floor(|x| * bins / range), the last bin taking what is at or past range).");
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
