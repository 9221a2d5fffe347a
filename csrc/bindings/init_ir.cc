// Bindings for building, printing, verifying and transforming graphs.
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "zenith/passes/passes.h"

namespace zenith::py {

namespace {

SymInt to_symint(Graph& g, nb::handle h) {
  if (nb::isinstance<nb::int_>(h)) return SymInt(nb::cast<int64_t>(h));
  if (nb::isinstance<nb::str>(h)) return parse_symint(nb::cast<std::string>(h), &g.symbols);
  fail("expected an int or a symbolic int expression string");
}

Shape to_shape(Graph& g, nb::handle seq) {
  Shape s;
  for (nb::handle h : seq) s.push_back(to_symint(g, h));
  return s;
}

std::map<std::string, Attr> to_attrs(Graph& g, const nb::dict& d) {
  std::map<std::string, Attr> out;
  for (auto [k, v] : d) {
    Attr a;
    std::string key = nb::cast<std::string>(k);
    if (nb::isinstance<nb::float_>(v)) {
      a.kind = Attr::kFloats;
      a.floats = {nb::cast<double>(v)};
    } else if (nb::isinstance<nb::bool_>(v) || nb::isinstance<nb::int_>(v)) {
      a.ints = {SymInt(nb::cast<int64_t>(v))};
    } else if (nb::isinstance<nb::str>(v)) {
      a.kind = Attr::kStr;
      a.str = nb::cast<std::string>(v);
    } else if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
      bool floats = false;
      for (nb::handle h : v) floats = floats || nb::isinstance<nb::float_>(h);
      if (floats) {
        a.kind = Attr::kFloats;
        for (nb::handle h : v) a.floats.push_back(nb::cast<double>(h));
      } else {
        a.ints = to_shape(g, v);
      }
    } else {
      fail("attribute '", key, "': unsupported Python type");
    }
    out[key] = std::move(a);
  }
  return out;
}

nb::list shape_to_py(const Graph& g, const Shape& s) {
  nb::list l;
  for (const auto& d : s) {
    if (d.is_const()) l.append(d.value());
    else l.append(d.str(g.symbols));
  }
  return l;
}

}  // namespace

void init_ir(nb::module_& m) {
  // The element types, declared once in dtype.h (ZENITH_DTYPES). Python reads the names
  // and codes from here rather than keeping its own copy: a member's value is the code
  // that Executable.run_raw and the `dtype` attribute of cast/full/arange take, and its
  // name the one Graph.add_input, add_scalar and value_dtype use.
  nb::enum_<DType> dtype(m, "DType", "Zenith element types; value = the dtype code of run_raw and attributes.");
#define X(name, ctype, size) dtype.value(#name, DType::name);
  ZENITH_DTYPES(X)
#undef X

  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def("add_input",
           [](Graph& g, const std::string& name, const std::string& dtype, nb::handle shape) {
             TensorType t;
             t.dtype = dtype_from_name(dtype);
             t.shape = to_shape(g, shape);
             return g.add_input(name, std::move(t));
           },
           nb::arg("name"), nb::arg("dtype"), nb::arg("shape"))
      .def("add_node",
           [](Graph& g, const std::string& op, std::vector<int> inputs, const nb::dict& attrs) {
             Op o;
             if (!parse_op(op, &o)) fail("unknown op '", op, "'");
             return g.add_node(o, std::move(inputs), to_attrs(g, attrs));
           },
           nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::dict())
      .def("add_constant",
           [](Graph& g, CpuArray a) {
             require_contiguous(a, "constant");
             TensorType t;
             t.dtype = dtype_from_dlpack(a.dtype());
             for (size_t d = 0; d < a.ndim(); ++d) t.shape.push_back(int64_t(a.shape(d)));
             // Borrowed: the Python side keeps the tensor alive for the graph's lifetime.
             return g.add_constant(std::move(t), a.data(), a.nbytes(), nullptr);
           },
           nb::arg("array"), "A constant over the array's memory, not copied; the caller keeps the array alive.")
      .def("add_scalar",
           [](Graph& g, double value, const std::string& dtype) {
             TensorType t;
             t.dtype = dtype_from_name(dtype);
             alignas(8) unsigned char buf[8] = {};
             switch (t.dtype) {
               case DType::f32: { float f = float(value); std::memcpy(buf, &f, 4); break; }
               case DType::f16: { uint16_t h = f32_to_f16(float(value)); std::memcpy(buf, &h, 2); break; }
               case DType::bf16: { uint16_t h = f32_to_bf16(float(value)); std::memcpy(buf, &h, 2); break; }
               case DType::i64: { int64_t v = int64_t(value); std::memcpy(buf, &v, 8); break; }
               case DType::i32: { int32_t v = int32_t(value); std::memcpy(buf, &v, 4); break; }
               case DType::b8: buf[0] = value != 0.0; break;
               case DType::u8: buf[0] = uint8_t(int64_t(value)); break;
             }
             return g.add_owned_constant(std::move(t), buf, dtype_size(t.dtype));
           },
           nb::arg("value"), nb::arg("dtype"), "A 0-d constant owned by the graph.")
      .def("set_outputs", [](Graph& g, std::vector<int> outs) { g.outputs = std::move(outs); }, nb::arg("outputs"))
      .def("set_name", [](Graph& g, int v, const std::string& name) { g.values.at(size_t(v)).name = name; },
           nb::arg("value"), nb::arg("name"))
      .def("value_dtype", [](const Graph& g, int v) { return std::string(dtype_name(g.type(v).dtype)); },
           nb::arg("value"))
      .def("value_shape", [](const Graph& g, int v) { return shape_to_py(g, g.type(v).shape); }, nb::arg("value"))
      .def_prop_ro("num_nodes", [](const Graph& g) { return g.nodes.size(); })
      .def_prop_ro("outputs", [](const Graph& g) { return g.outputs; })
      .def_prop_ro("inputs", [](const Graph& g) { return g.inputs; })
      .def_prop_ro("symbols", [](const Graph& g) { return g.symbols.names; }, "Symbols used by shapes and attributes.")
      .def("op_counts",
           [](const Graph& g) {
             std::map<std::string, int> c;
             for (const auto& n : g.nodes) ++c[op_info(n.op).name];
             return c;
           })
      .def("verify", [](const Graph& g) { verify(g); })
      .def("run_passes",
           [](Graph& g, bool verify_each) {
             std::vector<std::pair<std::string, int>> r;
             for (auto& p : run_default_pipeline(g, verify_each)) r.push_back({p.name, p.changes});
             return r;
           },
           nb::arg("verify_each") = false)
      .def("__str__", [](const Graph& g) { return print_graph(g); })
      .def_static("parse", [](const std::string& text) { return parse_graph(text); }, nb::arg("text"));

  m.def("op_names", [] {
    std::vector<std::string> r;
    for (int i = 0; i < kNumOps; ++i) r.push_back(op_info(Op(i)).name);
    return r;
  });
}

}  // namespace zenith::py
