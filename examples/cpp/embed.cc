// embed: sentence embeddings from a BERT-style encoder exported by zenith.export (for
// example all-MiniLM-L6-v2 with a symbolic sequence length), in C++ with no Python.
//
//   embed MODEL IDS [IDS ...]
//
// IDS is one sentence as its token ids, comma-separated ("101,7592,2088,102", what the
// model's tokenizer gives). Each sentence runs at batch 1 and its own length; the line
// printed for it is the mean over its tokens of the model's first output
// (last_hidden_state, [1, tokens, hidden]), L2-normalized, as sentence-transformers
// computes it. The model's inputs are filled by name: input_ids with the ids,
// attention_mask with ones, token_type_ids with zeros. Exit status 0, or 1 with the
// error on stderr (a zenith::Error names the file, input or op).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <zenith/zenith.h>

#include "token_ids.h"

namespace {

std::vector<float> embed(const zenith::Model& model, const std::vector<int64_t>& ids) {
  const int64_t n = int64_t(ids.size());
  const std::vector<int64_t> ones(ids.size(), 1), zeros(ids.size(), 0);
  std::vector<zenith::InTensor> inputs;
  for (const zenith::Model::Input& in : model.inputs()) {
    const std::vector<int64_t>* values = nullptr;
    if (in.name == "input_ids") values = &ids;
    else if (in.name == "attention_mask") values = &ones;
    else if (in.name == "token_type_ids") values = &zeros;
    else throw std::runtime_error("embed fills input_ids, attention_mask and token_type_ids; the model also takes " +
                                  in.name + " (" + in.type_str() + ")");
    if (in.dtype != zenith::DType::i64) throw std::runtime_error("input " + in.name + " is " + in.type_str() + ", not int64");
    inputs.push_back({values->data(), zenith::DType::i64, {1, n}});
  }
  // The model checks the inputs against its file: a length outside the exported range,
  // or a token id past the vocabulary, is a zenith::Error naming it.
  const std::vector<zenith::OutTensor> outs = model.run(inputs);
  const zenith::OutTensor& h = outs.at(0);
  if (h.dtype != zenith::DType::f32 || h.shape.size() != 3 || h.shape[0] != 1 || h.shape[1] != n)
    throw std::runtime_error("the model's first output is not f32[1, tokens, hidden]");
  const int64_t hidden = h.shape[2];
  const float* x = static_cast<const float*>(h.data);
  std::vector<float> mean(size_t(hidden), 0.0f);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < hidden; ++c) mean[size_t(c)] += x[t * hidden + c] / float(n);
  double norm = 0;
  for (float v : mean) norm += double(v) * v;
  const float scale = float(1.0 / std::max(std::sqrt(norm), 1e-12));
  for (float& v : mean) v *= scale;
  return mean;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: embed MODEL IDS [IDS ...]   (IDS: one sentence's token ids, e.g. 101,7592,102)\n");
    return 2;
  }
  try {
    const zenith::Model model(argv[1]);  // loads, passes and compiles the graph for this CPU
    for (int k = 2; k < argc; ++k) {
      const std::vector<float> e = embed(model, parse_token_ids(argv[k]));
      for (size_t c = 0; c < e.size(); ++c) std::printf(c ? " %.8g" : "%.8g", double(e[c]));
      std::printf("\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embed: %s\n", e.what());
    return 1;
  }
}
