#include "zenith/model_file.h"

#include <nlohmann/json.hpp>

#include "zenith/error.h"
#include "zenith/passes/passes.h"

namespace zenith {
namespace {

const std::string kInputPrefix = "input/";

// The "zenith.symbols" metadata: per symbol of g (by index), its [min, max] (max -1:
// unbounded); symbols the text does not list take [0, unbounded). `who` starts errors.
std::vector<std::pair<int64_t, int64_t>> symbol_ranges(const Graph& g, const std::string* text,
                                                       const std::string& who) {
  std::vector<std::pair<int64_t, int64_t>> r(g.symbols.names.size(), {0, -1});
  if (!text) return r;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception&) {
    fail(who, ": zenith.symbols is not valid JSON");
  }
  if (!j.is_object()) fail(who, ": zenith.symbols is not a JSON object");
  auto bound = [&](const nlohmann::json& e, const char* key, int64_t none) -> int64_t {
    if (!e.contains(key) || e[key].is_null()) return none;
    if (!e[key].is_number_integer() || e[key].get<int64_t>() < 0)
      fail(who, ": zenith.symbols: ", key, " must be a whole number >= 0");
    return e[key].get<int64_t>();
  };
  for (const auto& [name, e] : j.items()) {
    const int s = g.symbols.find(name);
    if (s < 0) fail(who, ": zenith.symbols names ", name, ", which is no symbol of the graph");
    if (!e.is_object()) fail(who, ": zenith.symbols: the entry of ", name, " is not an object");
    const int64_t lo = bound(e, "min", 0), hi = bound(e, "max", -1);
    if (hi >= 0 && hi < lo) fail(who, ": zenith.symbols: ", name, " has max ", hi, " below min ", lo);
    r[size_t(s)] = {lo, hi};
  }
  return r;
}

// For each symbol of g, the first model input dim that is that symbol alone (what binds
// it at run time), as "x dim 0"; a symbol nothing binds is an error.
std::vector<std::string> symbol_binders(const Graph& g, const std::vector<int>& model_inputs, const std::string& who) {
  std::vector<std::string> by(g.symbols.names.size());
  for (int v : model_inputs) {
    const auto& shape = g.type(v).shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int s = shape[d].symbol_index();
      if (s >= 0 && by[size_t(s)].empty()) by[size_t(s)] = g.value_name(v) + " dim " + std::to_string(d);
    }
  }
  for (size_t s = 0; s < by.size(); ++s)
    if (by[s].empty())
      fail(who, ": symbol ", g.symbols.names[s], " is no whole dim of any model input, so no input binds it");
  return by;
}

}  // namespace

std::string Model::Input::type_str() const {
  std::string r = std::string(dtype_name(dtype)) + "[";
  for (size_t d = 0; d < dims.size(); ++d) r += (d ? ", " : "") + dims[d];
  return r + "]";
}

void save_model(const std::string& path, const Graph& g, const std::map<std::string, InTensor>& bound,
                const std::map<std::string, std::string>& metadata) {
  verify(g);
  std::map<std::string, int> input_of;
  for (int v : g.inputs) input_of[g.value_name(v)] = v;
  std::vector<SafeTensorOut> tensors;
  std::string model_inputs;  // the graph inputs left unbound, which the loader checks
  std::vector<int> unbound;
  for (int v : g.inputs)
    if (!bound.count(g.value_name(v))) {
      model_inputs += (model_inputs.empty() ? "" : ",") + g.value_name(v);
      unbound.push_back(v);
    }
  symbol_binders(g, unbound, "save_model");  // (the loader refuses a symbol nothing binds)
  const auto sym_text = metadata.find("zenith.symbols");
  symbol_ranges(g, sym_text == metadata.end() ? nullptr : &sym_text->second, "save_model");
  for (const auto& [name, t] : bound) {
    auto it = input_of.find(name);
    if (it == input_of.end()) fail("save_model: a value is bound to ", name, ", which is no graph input");
    const TensorType& want = g.type(it->second);
    if (!want.is_static()) fail("save_model: input %", name, " has a symbolic shape; a bound value's must be static");
    if (t.dtype != want.dtype || t.shape != want.static_dims())
      fail("save_model: the value bound to %", name, " is ", dtype_name(t.dtype), dims_str(t.shape),
           ", the graph's input ", dtype_name(want.dtype), dims_str(want.static_dims()));
    tensors.push_back({kInputPrefix + name, t.dtype, t.shape, t.data});
  }
  std::vector<ExternalConstant> external;
  std::map<std::string, std::string> meta = metadata;
  meta["zenith.format"] = kModelFormat;
  meta["zenith.inputs"] = model_inputs;
  meta["zenith.graph"] = print_graph(g, &external);
  for (const ExternalConstant& c : external) tensors.push_back({c.key, c.type.dtype, c.type.static_dims(), c.data->data});
  write_safetensors(path, tensors, meta);
}

Model::Model(const std::string& path) : file_(read_safetensors(path)) {
  const auto fmt = file_.metadata.find("zenith.format");
  if (fmt == file_.metadata.end())
    fail(path, ": not a Zenith model file (its safetensors metadata has no zenith.format; zenith.export writes them)");
  if (fmt->second != kModelFormat)
    fail(path, ": model file format ", fmt->second, "; this build of Zenith reads format ", kModelFormat);
  const auto text = file_.metadata.find("zenith.graph");
  if (text == file_.metadata.end()) fail(path, ": the model file has no zenith.graph");
  std::map<std::string, bool> used;  // tensor name -> read by the graph
  for (const auto& [name, t] : file_.tensors) used[name] = false;
  const ConstantResolver resolve = [&](const std::string& key, const TensorType& t) -> std::shared_ptr<ConstData> {
    auto it = file_.tensors.find(key);
    if (it == file_.tensors.end()) fail(path, ": the graph's constant @", key, " has no tensor in the file");
    const SafeTensor& st = it->second;
    if (st.dtype != t.dtype || st.shape != t.static_dims())
      fail(path, ": tensor ", key, " is ", dtype_name(st.dtype), dims_str(st.shape), ", the graph's constant ",
           dtype_name(t.dtype), dims_str(t.static_dims()));
    used[key] = true;
    auto cd = std::make_shared<ConstData>();
    cd->data = st.data;
    cd->nbytes = st.nbytes;
    cd->owner = file_.keep;
    return cd;
  };
  Graph g;
  try {
    g = parse_graph(text->second, resolve);
    verify(g, /*exact=*/true);  // every stated size as inference gives it: the runtime plans by them
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {  // zenith::Error, or a number the text's parser could not take
    fail(path, ": its graph does not load: ", e.what());
  }
  // Every value's static dims, before a pass or the planner multiplies them unchecked: a
  // static value's size under 2^48 bytes, a symbolic one's static part (the Executable
  // checks its whole size when it plans each set of symbol values).
  for (const Value& v : g.values) {
    TensorType part = v.type;
    for (SymInt& d : part.shape)
      if (!d.is_const()) d = SymInt(1);
    uint64_t bytes;
    if (!bounded_nbytes(part, uint64_t(1) << 48, &bytes))
      fail(path, ": value %", v.name, " has a shape that is negative or past 2^48 bytes");
  }
  std::vector<int> model_inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const int v = g.inputs[i];
    const std::string name = g.value_name(v);
    auto it = file_.tensors.find(kInputPrefix + name);
    if (it == file_.tensors.end()) {  // the model's input
      Input in{name, g.type(v).dtype, {}, {}};
      for (const SymInt& d : g.type(v).shape) {
        in.shape.push_back(d.is_const() ? d.value() : -1);
        in.dims.push_back(d.str(g.symbols));
      }
      inputs_.push_back(std::move(in));
      user_at_.push_back(i);
      all_.push_back(InTensor{nullptr, g.type(v).dtype, inputs_.back().shape});
      model_inputs.push_back(v);
      continue;
    }
    if (!g.type(v).is_static()) fail(path, ": weight %", name, " has a symbolic shape");
    const std::vector<int64_t> shape = g.type(v).static_dims();
    const SafeTensor& st = it->second;
    if (st.dtype != g.type(v).dtype || st.shape != shape)
      fail(path, ": tensor ", it->first, " is ", dtype_name(st.dtype), dims_str(st.shape), ", the graph's input ",
           dtype_name(g.type(v).dtype), dims_str(shape));
    used[it->first] = true;
    all_.push_back(InTensor{st.data, st.dtype, shape});
  }
  {
    const std::vector<std::string> by = symbol_binders(g, model_inputs, path);
    const auto sym_text = file_.metadata.find("zenith.symbols");
    const auto ranges = symbol_ranges(g, sym_text == file_.metadata.end() ? nullptr : &sym_text->second, path);
    for (size_t k = 0; k < by.size(); ++k)
      symbols_.push_back({g.symbols.names[k], by[k], ranges[k].first, ranges[k].second});
  }
  std::string names;
  for (const Input& in : inputs_) names += (names.empty() ? "" : ",") + in.name;
  const auto declared = file_.metadata.find("zenith.inputs");
  if (declared == file_.metadata.end() || declared->second != names)
    fail(path, ": the graph's unbound inputs are (", names, "), the file declares (",
         declared == file_.metadata.end() ? std::string("none") : declared->second,
         "): a weight's tensor is missing");
  for (const auto& [name, u] : used)
    if (!u) fail(path, ": tensor ", name, " is read by no part of the graph (a file from another graph?)");
  try {
    run_default_pipeline(g);
    exe_ = std::make_unique<Executable>(std::move(g));
  } catch (const Error& e) {
    fail(path, ": its graph does not compile: ", e.what());
  }
  std::vector<int> weights;
  for (size_t i = 0; i < all_.size(); ++i)
    if (all_[i].data) weights.push_back(int(i));
  exe_->set_constant_inputs(weights);  // the mapping is read-only: they never change
}

std::vector<OutTensor> Model::run(const std::vector<InTensor>& inputs) const {
  if (inputs.size() != inputs_.size())
    fail("model: ", inputs.size(), " inputs given, the model takes ", inputs_.size());
  std::vector<InTensor> all = all_;
  std::vector<int64_t> bind(symbols_.size(), -1);
  const Graph& g = exe_->graph();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Input& want = inputs_[k];
    const InTensor& t = inputs[k];
    auto given = [&] { return std::string(dtype_name(t.dtype)) + dims_str(t.shape); };
    bool fits = t.dtype == want.dtype && t.shape.size() == want.shape.size();
    for (size_t d = 0; fits && d < t.shape.size(); ++d)
      fits = t.shape[d] >= 0 && (want.shape[d] < 0 || t.shape[d] == want.shape[d]);
    if (!fits)
      fail("model: input ", k, " (", want.name, ") is ", given(), ", the model takes ", want.type_str());
    const auto& shape = g.type(g.inputs[user_at_[k]]).shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int s = shape[d].symbol_index();
      if (s < 0) continue;  // (a static dim, checked above, or an expression, which the Executable checks)
      const Symbol& sym = symbols_[size_t(s)];
      const int64_t v = t.shape[d];
      if (bind[size_t(s)] >= 0 && bind[size_t(s)] != v)
        fail("model: input ", k, " (", want.name, ") is ", given(), ": its dim ", d, " is ", sym.name, ", which ",
             sym.bound_by, " made ", bind[size_t(s)]);
      bind[size_t(s)] = v;
      if (v < sym.min || (sym.max >= 0 && v > sym.max))
        fail("model: input ", k, " (", want.name, ") is ", given(), ": its dim ", d, " (", sym.name,
             ") takes sizes ", sym.min, "..", sym.max >= 0 ? std::to_string(sym.max) : std::string(""));
    }
    uint64_t bytes;
    if (!bounded_nbytes(t.dtype, t.shape, uint64_t(1) << 48, &bytes))
      fail("model: input ", k, " (", want.name, ") is ", given(), ": past 2^48 bytes");
    if (!t.data && bytes) fail("model: input ", k, " (", want.name, ") has no data");
    all[user_at_[k]] = t;
  }
  return exe_->run(all, {});
}

}  // namespace zenith
