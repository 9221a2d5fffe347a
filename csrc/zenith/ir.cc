// Graph building and the verifier.
#include <cstdlib>
#include <cstring>
#include <set>

#include "zenith/attrs.h"
#include "zenith/error.h"
#include "zenith/ir.h"

namespace zenith {

int Graph::add_input(const std::string& name, TensorType t) {
  values.push_back({name, std::move(t), -1});
  int id = int(values.size()) - 1;
  inputs.push_back(id);
  return id;
}

std::vector<int> Graph::add_node(Op op, std::vector<int> ins, std::map<std::string, Attr> attrs) {
  const OpInfo& info = op_info(op);
  ZENITH_CHECK(info.num_inputs < 0 || int(ins.size()) == info.num_inputs, info.name, ": expects ", info.num_inputs,
               " inputs, got ", ins.size());
  for (int v : ins) ZENITH_CHECK(v >= 0 && size_t(v) < values.size(), info.name, ": unknown input value ", v);
  Node n;
  n.op = op;
  n.inputs = std::move(ins);
  n.attrs = std::move(attrs);
  normalize_attrs(op, n.attrs);
  check_attrs(n);
  std::vector<TensorType> types = info.infer(*this, n);
  ZENITH_CHECK(info.num_outputs < 0 ? !types.empty() : int(types.size()) == info.num_outputs, info.name,
               ": inference returned ", types.size(), " outputs");
  int node_index = int(nodes.size());
  for (auto& t : types) {
    values.push_back({"", std::move(t), node_index});
    n.outputs.push_back(int(values.size()) - 1);
  }
  nodes.push_back(std::move(n));
  return nodes.back().outputs;
}

int Graph::add_constant(TensorType t, const void* data, size_t nbytes, std::shared_ptr<void> owner) {
  ZENITH_CHECK(t.is_static(), "constant: shape must be static");
  ZENITH_CHECK(size_t(t.static_numel()) * dtype_size(t.dtype) == nbytes, "constant: ", nbytes,
               " bytes do not match its type");
  std::map<std::string, Attr> attrs;
  Node tmp;
  tmp.set_int("dtype", int64_t(t.dtype));
  tmp.set_ints("shape", t.shape);
  int v = add_node(Op::constant, {}, std::move(tmp.attrs))[0];
  auto cd = std::make_shared<ConstData>();
  cd->data = data;
  cd->nbytes = nbytes;
  cd->owner = std::move(owner);
  nodes.back().constant = std::move(cd);
  return v;
}

int Graph::add_owned_constant(TensorType t, const void* data, size_t nbytes) {
  std::shared_ptr<void> buf(std::malloc(nbytes ? nbytes : 1), std::free);
  if (nbytes) std::memcpy(buf.get(), data, nbytes);
  const void* p = buf.get();
  return add_constant(std::move(t), p, nbytes, std::move(buf));
}

void Graph::reindex() {
  for (auto& v : values) v.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int o : nodes[i].outputs) values[size_t(o)].producer = int(i);
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values.size(), 0);
  for (const auto& n : nodes)
    for (int v : n.inputs) ++uses[size_t(v)];
  for (int v : outputs) ++uses[size_t(v)];
  return uses;
}

std::string Graph::value_name(int v) const {
  const auto& n = values[size_t(v)].name;
  return n.empty() ? "v" + std::to_string(v) : n;
}

void verify(const Graph& g, bool exact) {
  std::vector<bool> defined(g.values.size(), false);
  std::set<std::string> names;
  auto define = [&](int v, const char* where) {
    ZENITH_CHECK(v >= 0 && size_t(v) < g.values.size(), where, ": value id ", v, " out of range");
    ZENITH_CHECK(!defined[size_t(v)], where, ": value %", g.value_name(v), " defined twice");
    defined[size_t(v)] = true;
    ZENITH_CHECK(names.insert(g.value_name(v)).second, where, ": name %", g.value_name(v), " used twice");
  };
  for (int v : g.inputs) define(v, "graph input");
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const OpInfo& info = op_info(n.op);
    ZENITH_CHECK(info.num_inputs < 0 || int(n.inputs.size()) == info.num_inputs, "node ", i, " (", info.name,
                 "): has ", n.inputs.size(), " inputs, expects ", info.num_inputs);
    ZENITH_CHECK(info.num_outputs < 0 ? !n.outputs.empty() : int(n.outputs.size()) == info.num_outputs, "node ", i,
                 " (", info.name, "): has ", n.outputs.size(), " outputs");
    for (int v : n.inputs) {
      ZENITH_CHECK(v >= 0 && size_t(v) < g.values.size() && defined[size_t(v)], "node ", i, " (", info.name,
                   "): uses %", (v >= 0 && size_t(v) < g.values.size()) ? g.value_name(v) : std::to_string(v),
                   " before it is defined");
    }
    ZENITH_CHECK((n.op == Op::constant) == bool(n.constant), "node ", i, " (", info.name,
                 "): constant data present iff op is constant");
    if (n.constant) {
      const auto& t = g.type(n.outputs[0]);
      ZENITH_CHECK(size_t(t.static_numel()) * dtype_size(t.dtype) == n.constant->nbytes, "node ", i,
                   ": constant size does not match its type");
    }
    try {
      check_attrs(n);
    } catch (const Error& e) {
      fail("node ", i, ": ", e.what());
    }
    std::vector<TensorType> types;
    try {
      types = info.infer(g, n);
    } catch (const Error& e) {
      fail("node ", i, " (", info.name, "): ", e.what());
    }
    ZENITH_CHECK(types.size() == n.outputs.size(), "node ", i, " (", info.name, "): has ", n.outputs.size(),
                 " outputs, inference gives ", types.size());
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      define(n.outputs[k], info.name);
      const TensorType& have = g.type(n.outputs[k]);
      const TensorType& want = types[k];
      bool same = have.dtype == want.dtype && have.shape.size() == want.shape.size();
      for (size_t d = 0; same && d < have.shape.size(); ++d) {
        const SymInt &a = have.shape[d], &b = want.shape[d];
        same = exact ? a.same(b) : (a.is_const() && b.is_const()) ? a.value() == b.value() : true;
      }
      ZENITH_CHECK(same, "node ", i, " (", info.name, "): output %", g.value_name(n.outputs[k]),
                   " has a type that disagrees with inference");
    }
  }
  for (int v : g.outputs)
    ZENITH_CHECK(v >= 0 && size_t(v) < g.values.size() && defined[size_t(v)], "graph output ", v, " is not defined");
  // A hand-off as panels (addmm's `panels`, gemm_handoff_transposed) holds its values in
  // an order only its pair knows: the writer's result is no graph output and is read, as
  // its A, by one addmm marked to read it so (and otherwise only by reshapes the pass left
  // to dce); that reader's A comes from such a writer.
  auto panels = [&](const Node& n, const char* side) {
    return n.op == Op::addmm && n.i("panels", 0) && n.i(side, 0);
  };
  std::vector<int> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].outputs) producer[size_t(v)] = int(i);
  std::vector<int> panel_readers(g.values.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == Op::addmm && n.i("panels", 0))
      ZENITH_CHECK(bool(n.i("trans_c", 0)) != bool(n.i("trans_a", 0)), "node ", i,
                   " (addmm): panels needs trans_c (the writer) or trans_a (the reader)");
    if (panels(n, "trans_a")) {
      const int w = producer[size_t(n.inputs[1])];
      ZENITH_CHECK(w >= 0 && panels(g.nodes[size_t(w)], "trans_c"), "node ", i,
                   " (addmm): reads panels its A's producer does not write");
      ZENITH_CHECK(++panel_readers[size_t(n.inputs[1])] == 1, "node ", i, " (addmm): %",
                   g.value_name(n.inputs[1]), ", a hand-off as panels, has a second reader");
    }
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      const int w = producer[size_t(n.inputs[s])];
      if (w < 0 || !panels(g.nodes[size_t(w)], "trans_c") || n.op == Op::reshape) continue;
      ZENITH_CHECK(panels(n, "trans_a") && s == 1, "node ", i, " (", op_info(n.op).name, "): reads %",
                   g.value_name(n.inputs[s]), ", a hand-off as panels only its addmm reads");
    }
  }
  for (int v : g.outputs) {
    const int w = producer[size_t(v)];
    ZENITH_CHECK(w < 0 || !panels(g.nodes[size_t(w)], "trans_c"), "graph output %", g.value_name(v),
                 " is a hand-off as panels");
  }
}

}  // namespace zenith
