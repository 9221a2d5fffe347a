// Bindings for compiling a graph into an Executable and calling it. Tensors cross
// without copies in both directions (DLPack); the GIL is released while kernels run.
#include <algorithm>

#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "zenith/buffer_cache.h"
#include "zenith/runtime.h"
#include "zenith/kernels/gemm_ukernels.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

namespace zenith::py {

namespace {
// Outputs become torch tensors without a copy (to_torch, convert.h).
nb::list run_and_wrap(const Executable& exe, const std::vector<InTensor>& ins, const std::vector<int64_t>& ints,
                      int weight_slot = 0) {
  std::vector<OutTensor> outs;
  {
    nb::gil_scoped_release nogil;
    outs = exe.run(ins, ints, weight_slot);
  }
  nb::list result;
  for (auto& o : outs) result.append(to_torch(o.storage, o.data, o.dtype, o.shape));
  return result;
}
}  // namespace

void init_runtime(nb::module_& m) {
  m.def("set_num_threads", &set_num_threads,
        "Size of Zenith's kernel thread pool (0: OpenMP's count, the default; negative: an error).");
  m.def("num_threads", &num_threads);
  m.def("sgemm_isa", &sgemm_isa, "The SGEMM micro-kernel chosen for this CPU.");
  m.def("buffer_cache_bytes", &buffer_cache_bytes, "Bytes of freed output buffers kept for reuse.");
  m.def("buffer_cache_limit", &buffer_cache_limit, "The most the output buffer cache holds (ZENITH_OUTPUT_CACHE_MB).");
  m.def("release_buffer_cache", &release_buffer_cache, "Frees the output buffers kept for reuse; their bytes.");
  m.def("conv2d_uses_winograd",
        [](int64_t groups, int64_t kh, int64_t kw, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
           std::array<int64_t, 2> dilation, int64_t c, int64_t h, int64_t w, int64_t oc) {
          return conv2d_uses_winograd(groups, kh, kw, stride, padding, dilation, c, h, w, oc);
        },
        "Whether conv2d runs a conv of these shapes by Winograd (with constant filters).");
  m.def("conv2d_winograd_per_call", &conv2d_winograd_per_call,
        "Whether conv2d runs a Winograd conv of N images of H x W by Winograd when its filters are not constant.");
  m.def(
      "isa_mac_rates",
      [](int64_t iters, int runs) {
        std::vector<IsaRate> rates;
        {
          nb::gil_scoped_release release;
          rates = isa_mac_rates(iters, runs);
        }
        nb::list l;
        for (const IsaRate& r : rates) {
          nb::dict d;
          d["name"] = r.name;
          d["supported"] = r.supported;
          d["gmacs"] = r.macs_per_ns;
          l.append(d);
        }
        return l;
      },
      nb::arg("iters") = 20000000, nb::arg("runs") = 3,
      "Each GEMM instruction's multiply-add rate on one core (fp32 FMA, int8 dot products), GMAC/s, "
      "as dicts: name, supported, gmacs (0 where the CPU lacks it). Runs with the GIL released.");
  m.def(
      "gemm_ukernels",
      [] {
        nb::list l;
        for (const GemmUkernelInfo& u : gemm_ukernels()) {
          nb::dict d;
          d["name"] = u.name;
          d["isa"] = u.isa;
          d["mr"] = u.mr;
          d["nr"] = u.nr;
          d["a"] = u.a_rows ? "rows" : "packed";
          d["ka"] = u.ka;
          d["kb"] = u.kb;
          d["supported"] = u.supported;
          l.append(d);
        }
        return l;
      },
      "The f32 GEMM micro-kernels (gemm_ukernels.def), each a dict: name, isa, mr, nr (its tile), "
      "a ('packed' or 'rows': how it reads A), ka, kb (panel widths), supported (this CPU runs it).");
  using Matrix = nb::ndarray<const float, nb::ndim<2>, nb::device::cpu>;
  using OutMatrix = nb::ndarray<float, nb::ndim<2>, nb::device::cpu>;
  nb::class_<GemmUkernelCase>(m, "GemmUkernelCase",
                              "C = A @ B by one GEMM micro-kernel alone, on the calling thread, with A and B "
                              "copied into its layouts when made; run() computes C.")
      .def(
          "__init__",
          [](GemmUkernelCase* self, const std::string& name, const Matrix& a, const Matrix& b, int64_t kc) {
            if ((a.shape(1) > 1 && a.stride(1) != 1) || (b.shape(1) > 1 && b.stride(1) != 1))
              fail("GemmUkernelCase: A and B need contiguous rows");
            if (a.shape(1) != b.shape(0))
              fail("GemmUkernelCase: A is ", a.shape(0), "x", a.shape(1), ", B ", b.shape(0), "x", b.shape(1));
            new (self) GemmUkernelCase(gemm_ukernel_index(name), int64_t(a.shape(0)), int64_t(b.shape(1)),
                                       int64_t(a.shape(1)), a.data(), std::max<int64_t>(a.stride(0), a.shape(1)),
                                       b.data(), std::max<int64_t>(b.stride(0), b.shape(1)), kc);
          },
          nb::arg("name"), nb::arg("a"), nb::arg("b"), nb::arg("kc") = 256)
      .def(
          "run",
          [](const GemmUkernelCase& g, OutMatrix c, bool accumulate) {
            if (int64_t(c.shape(0)) != g.rows() || int64_t(c.shape(1)) != g.cols())
              fail("GemmUkernelCase.run: C is ", c.shape(0), "x", c.shape(1), ", A @ B ", g.rows(), "x", g.cols());
            if (c.shape(1) > 1 && c.stride(1) != 1) fail("GemmUkernelCase.run: C needs contiguous rows");
            nb::gil_scoped_release nogil;
            g.run(c.data(), std::max<int64_t>(c.stride(0), c.shape(1)), accumulate);
          },
          nb::arg("c"), nb::arg("accumulate") = false,
          "Writes A @ B into c (or adds it, accumulate=True); c must have A's rows and B's columns.");
  m.def("profile_enable", &profile_enable);
  m.def("profile_reset", &profile_reset);
  m.def("profile_snapshot", [] {
    nb::dict d;
    for (auto& [name, e] : profile_snapshot()) d[name.c_str()] = nb::make_tuple(e.calls, e.seconds);
    return d;
  });
  m.def("profile_trace_enable", &profile_trace_enable);
  m.def("profile_events_dropped", &profile_events_dropped);
  m.def("profile_events", [] {  // (op, node, graph, thread, start_us, dur_us, out_shape, (M, N, K)) tuples
    nb::list l;
    for (const auto& e : profile_events())
      l.append(nb::make_tuple(op_info(e.op).name, e.node, e.graph, e.thread, e.start_us, e.dur_us,
                              nb::tuple(nb::cast(e.out_shape)),
                              nb::make_tuple(e.gemm.m, e.gemm.n, e.gemm.k)));
    return l;
  });
  nb::class_<Executable>(m, "Executable")
      .def(
          "__init__",
          [](Executable* self, const Graph& g, std::vector<std::string> symbol_inputs) {
            new (self) Executable(g, Device::kCPU, std::move(symbol_inputs));
          },
          nb::arg("graph"), nb::arg("symbol_inputs") = std::vector<std::string>{})
      .def(
          "run",
          [](const Executable& exe, const std::vector<CpuArray>& arrays, const std::vector<int64_t>& ints) {
            std::vector<InTensor> ins;
            ins.reserve(arrays.size());
            for (size_t i = 0; i < arrays.size(); ++i) ins.push_back(in_tensor(arrays[i], "input " + std::to_string(i)));
            return run_and_wrap(exe, ins, ints);
          },
          nb::arg("inputs"), nb::arg("ints") = std::vector<int64_t>{},
          "Runs on CPU arrays (DLPack); outputs are torch tensors that own Zenith's buffers.")
      .def(
          "run_raw",
          [](const Executable& exe, const nb::list& raw, const std::vector<int64_t>& ints, int weight_slot) {
            const Graph& g = exe.graph();
            std::vector<InTensor> ins(raw.size());
            for (size_t i = 0; i < ins.size(); ++i) {
              nb::handle h = raw[i];
              InTensor& in = ins[i];
              if (nb::isinstance<nb::int_>(h)) {  // a bare data pointer: the compiled dtype and shape
                if (i >= g.inputs.size()) fail("run_raw: ", raw.size(), " inputs for a graph of ", g.inputs.size());
                const TensorType& t = g.type(g.inputs[i]);
                if (!t.is_static()) fail("run_raw: input ", i, " is a bare pointer but its shape is symbolic");
                in.data = reinterpret_cast<const void*>(nb::cast<uintptr_t>(h));
                in.dtype = t.dtype;
                in.shape.reserve(t.shape.size());
                for (const SymInt& d : t.shape) in.shape.push_back(d.value());
                continue;
              }
              const auto [ptr, code, shape] = nb::cast<std::tuple<uintptr_t, int, std::vector<int64_t>>>(h);
              if (code < 0 || code >= kNumDTypes) fail("run_raw: bad dtype code ", code);
              in = InTensor{reinterpret_cast<const void*>(ptr), DType(code), shape};
            }
            return run_and_wrap(exe, ins, ints, weight_slot);
          },
          nb::arg("inputs"), nb::arg("ints") = std::vector<int64_t>{}, nb::arg("weight_slot") = 0,
          "The per-call fast path: (data_ptr, dtype code, shape) of dense CPU tensors that the "
          "caller keeps alive for the duration of the call, or a bare data_ptr for an input of static "
          "shape that has the compiled dtype and shape (a parameter: no tuple to build and parse). "
          "Skips DLPack export. weight_slot: which slot of kept packed weights this call's constant "
          "inputs use (one per model instance).")
      .def_prop_ro("packable_inputs", &Executable::packable_inputs,
                   "Inputs some node reads packed when constant (so far): the ones whose changes matter.")
      .def_prop_ro("packable_generation", &Executable::packable_generation,
                   "Bumped whenever packable_inputs grows.")
      .def("set_constant_inputs", &Executable::set_constant_inputs, nb::arg("positions"),
           "Marks inputs (by position) as constant weights that GEMMs may keep packed.")
      .def("drop_packed", &Executable::drop_packed, "Forgets packed weights (their data changed).")
      .def_prop_ro("packed_bytes", &Executable::packed_bytes)
      .def_prop_ro("holds_packed", &Executable::holds_packed)
      .def_prop_ro("arena_bytes", &Executable::planned_arena_bytes)
      .def_prop_ro("reused_bytes", &Executable::planned_reused_bytes)
      .def_prop_ro("num_plans", &Executable::num_plans)
      .def_prop_ro("graph_text", [](const Executable& e) { return print_graph(e.graph()); });
  m.attr("WEIGHT_SLOTS") = Executable::kKeptPerNode;  // run_raw's weight_slot is below this
}

}  // namespace zenith::py
