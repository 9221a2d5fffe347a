#include "zenith/model_file.h"

#include "zenith/error.h"
#include "zenith/passes/passes.h"

namespace zenith {
namespace {

const std::string kInputPrefix = "input/";

}  // namespace

void save_model(const std::string& path, const Graph& g, const std::map<std::string, InTensor>& bound,
                const std::map<std::string, std::string>& metadata) {
  verify(g);
  std::map<std::string, int> input_of;
  for (int v : g.inputs) {
    if (!g.type(v).is_static())
      fail("save_model: input %", g.value_name(v), " has a symbolic shape; model files hold static shapes");
    input_of[g.value_name(v)] = v;
  }
  std::vector<SafeTensorOut> tensors;
  std::string model_inputs;  // the graph inputs left unbound, which the loader checks
  for (int v : g.inputs)
    if (!bound.count(g.value_name(v))) model_inputs += (model_inputs.empty() ? "" : ",") + g.value_name(v);
  for (const auto& [name, t] : bound) {
    auto it = input_of.find(name);
    if (it == input_of.end()) fail("save_model: a value is bound to ", name, ", which is no graph input");
    const TensorType& want = g.type(it->second);
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
    verify(g);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {  // zenith::Error, or a number the text's parser could not take
    fail(path, ": its graph does not load: ", e.what());
  }
  // Every value's size, before a pass or the planner multiplies them unchecked.
  uint64_t bytes;
  for (const Value& v : g.values)
    if (!bounded_nbytes(v.type, uint64_t(1) << 48, &bytes))
      fail(path, ": value %", v.name, " has a shape that is symbolic, negative or past 2^48 bytes");
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const int v = g.inputs[i];
    const std::string name = g.value_name(v);
    const std::vector<int64_t> shape = g.type(v).static_dims();  // (every size checked above)
    auto it = file_.tensors.find(kInputPrefix + name);
    if (it == file_.tensors.end()) {  // the model's input
      inputs_.push_back({name, g.type(v).dtype, shape});
      user_at_.push_back(i);
      all_.push_back(InTensor{nullptr, g.type(v).dtype, shape});
      continue;
    }
    const SafeTensor& st = it->second;
    if (st.dtype != g.type(v).dtype || st.shape != shape)
      fail(path, ": tensor ", it->first, " is ", dtype_name(st.dtype), dims_str(st.shape), ", the graph's input ",
           dtype_name(g.type(v).dtype), dims_str(shape));
    used[it->first] = true;
    all_.push_back(InTensor{st.data, st.dtype, shape});
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
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Input& want = inputs_[k];
    const InTensor& t = inputs[k];
    if (t.dtype != want.dtype || t.shape != want.shape)
      fail("model: input ", k, " (", want.name, ") is ", dtype_name(t.dtype), dims_str(t.shape), ", the model takes ",
           dtype_name(want.dtype), dims_str(want.shape));
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (!t.data && numel) fail("model: input ", k, " (", want.name, ") has no data");
    all[user_at_[k]] = t;
  }
  return exe_->run(all, {});
}

}  // namespace zenith
