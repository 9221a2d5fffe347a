// Bindings for model files (model_file.h): zenith.export writes one, zenith.load runs one.
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "zenith/model_file.h"

namespace zenith::py {

void init_model(nb::module_& m) {
  m.def(
      "save_model",
      [](const Graph& g, const std::string& path, const std::map<std::string, CpuArray>& bound,
         const std::map<std::string, std::string>& metadata) {
        std::map<std::string, InTensor> b;
        for (const auto& [name, a] : bound) b.emplace(name, in_tensor(a, "weight " + name));
        nb::gil_scoped_release nogil;
        save_model(path, g, b, metadata);
      },
      nb::arg("graph"), nb::arg("path"), nb::arg("bound"), nb::arg("metadata"),
      "Writes a model file: the graph (before passes) and the arrays bound to its inputs, by input name.");
  nb::class_<Model>(m, "Model", "A model file loaded by the C++ runtime (the same code zenith-run runs).")
      .def(
          "__init__",
          [](Model* self, const std::string& path) {
            nb::gil_scoped_release nogil;
            new (self) Model(path);
          },
          nb::arg("path"))
      .def_prop_ro("inputs",
                   [](const Model& md) {
                     nb::list l;
                     for (const auto& in : md.inputs()) {
                       nb::list dims;  // a static dim as an int, a symbolic one as its text ("s0")
                       for (size_t d = 0; d < in.shape.size(); ++d)
                         dims.append(in.shape[d] >= 0 ? nb::object(nb::int_(in.shape[d])) : nb::str(in.dims[d].c_str()));
                       l.append(nb::make_tuple(in.name, std::string(dtype_name(in.dtype)), nb::tuple(dims)));
                     }
                     return l;
                   },
                   "The model's inputs: (name, dtype name, dims) each; a symbolic dim is its text (\"s0\").")
      .def_prop_ro("symbols",
                   [](const Model& md) {
                     nb::dict d;
                     for (const auto& s : md.symbols())
                       d[s.name.c_str()] = nb::make_tuple(s.bound_by, s.min, s.max >= 0 ? nb::object(nb::int_(s.max))
                                                                                         : nb::none());
                     return d;
                   },
                   "Each symbolic size: name -> (the input dim that binds it, min, max or None).")
      .def_prop_ro("metadata", &Model::metadata)
      .def_prop_ro("num_outputs", &Model::num_outputs)
      .def_prop_ro("graph_text", [](const Model& md) { return print_graph(md.executable().graph()); },
                   "The graph after this machine's passes.")
      .def(
          "run",
          [](const Model& md, const std::vector<CpuArray>& arrays) {
            std::vector<InTensor> ins;
            for (size_t i = 0; i < arrays.size(); ++i) ins.push_back(in_tensor(arrays[i], "input " + std::to_string(i)));
            std::vector<OutTensor> outs;
            {
              nb::gil_scoped_release nogil;
              outs = md.run(ins);
            }
            nb::list result;
            for (auto& o : outs) result.append(to_torch(o.storage, o.data, o.dtype, o.shape));
            return result;
          },
          nb::arg("inputs"), "Runs on dense CPU arrays (DLPack), in the inputs' order; outputs are torch tensors.");
}

}  // namespace zenith::py
