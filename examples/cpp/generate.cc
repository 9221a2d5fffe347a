// generate: greedy text generation from a decoder file (zenith.export_decoder, e.g. Gemma 3
// 270M from its GGUF) in C++ with no Python.
//
//   generate MODEL IDS [--max-new N]
//
// IDS is the prompt as token ids, comma-separated (the model's tokenizer gives them). The
// file's first input is input_ids [1, new]; the others are the KV cache, keys and values
// per layer [1, kv_heads, past, head_dim]; its outputs are the last position's logits
// [1, 1, vocab] and the cache grown by the new tokens. The first call takes the whole
// prompt with an empty cache; each later call takes the token just chosen (the argmax)
// and the cache the previous call returned, passed back without a copy. Generation stops
// at an end-of-sequence id (the file's "zenith.decoder.eos"), after N new tokens (default
// 32), or when the cache is full ("zenith.decoder.max_length").
//
// Prints the new token ids, comma-separated, on stdout, and the timings on stderr: the
// prompt's call, and the median of the later calls (ms per token). Exit status 0, or 1
// with the error on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <zenith/zenith.h>

#include "token_ids.h"

namespace {

std::string note(const zenith::Model& model, const std::string& key) {
  auto it = model.metadata().find(key);
  if (it == model.metadata().end())
    throw std::runtime_error("the file has no " + key + " (zenith.export_decoder writes decoder files)");
  return it->second;
}

int64_t argmax_last(const zenith::OutTensor& logits) {
  if (logits.dtype != zenith::DType::f32 || logits.shape.size() != 3 || logits.shape[1] < 1)
    throw std::runtime_error("the first output is not f32 logits [1, positions, vocab]");
  const int64_t vocab = logits.shape[2];
  const float* row = static_cast<const float*>(logits.data) + (logits.shape[1] - 1) * vocab;
  return int64_t(std::max_element(row, row + vocab) - row);  // the first of equal maxima, as torch.argmax
}

int generate(const std::string& path, std::vector<int64_t> ids, int max_new) {
  const zenith::Model model(path);
  const int64_t limit = std::stoll(note(model, "zenith.decoder.max_length"));
  std::set<int64_t> eos;
  const std::string eos_text = note(model, "zenith.decoder.eos");
  if (!eos_text.empty())
    for (int64_t t : parse_token_ids(eos_text)) eos.insert(t);
  const auto& ins = model.inputs();
  if (ins.empty() || ins[0].dtype != zenith::DType::i64 || model.num_outputs() != ins.size())
    throw std::runtime_error("not a decoder file: its inputs are input_ids and the cache, its outputs the logits and the cache");

  if (int64_t(ids.size()) > limit)
    throw std::runtime_error("the prompt has " + std::to_string(ids.size()) + " tokens; the file holds at most " +
                             std::to_string(limit));
  // The first call's cache: every past tensor empty (its symbolic dim 0).
  std::vector<zenith::InTensor> inputs(ins.size());
  for (size_t k = 1; k < ins.size(); ++k) {
    std::vector<int64_t> shape = ins[k].shape;
    for (int64_t& d : shape) d = d < 0 ? 0 : d;
    inputs[k] = {nullptr, ins[k].dtype, shape};
  }
  std::vector<int64_t> step = ids;  // the tokens this call takes
  std::vector<zenith::OutTensor> outs;
  std::vector<int64_t> generated;
  std::vector<double> ms;
  while (int(generated.size()) < max_new && int64_t(ids.size()) <= limit) {  // (a call holds ids.size() tokens)
    inputs[0] = {step.data(), zenith::DType::i64, {1, int64_t(step.size())}};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<zenith::OutTensor> next = model.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    outs = std::move(next);  // the previous cache is freed here, after the call that read it
    for (size_t k = 1; k < outs.size(); ++k) inputs[k] = {outs[k].data, outs[k].dtype, outs[k].shape};
    const int64_t token = argmax_last(outs[0]);
    generated.push_back(token);
    ids.push_back(token);
    step = {token};
    if (eos.count(token)) break;
  }
  for (size_t k = 0; k < generated.size(); ++k) std::printf(k ? ",%lld" : "%lld", (long long)generated[k]);
  std::printf("\n");
  std::vector<double> later(ms.begin() + (ms.empty() ? 0 : 1), ms.end());
  std::sort(later.begin(), later.end());
  std::fprintf(stderr, "prompt: %zu tokens in %.1f ms; %zu more token(s)", ids.size() - generated.size(),
               ms.empty() ? 0.0 : ms[0], later.size());
  if (!later.empty()) std::fprintf(stderr, ", median %.2f ms per token", later[later.size() / 2]);
  std::fprintf(stderr, " (%d thread(s))\n", zenith::num_threads());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int max_new = 32;
  for (size_t k = 0; k < args.size(); ++k)
    if (args[k] == "--max-new" && k + 1 < args.size()) {
      max_new = std::atoi(args[k + 1].c_str());
      args.erase(args.begin() + long(k), args.begin() + long(k) + 2);
      break;
    }
  if (args.size() != 2 || max_new < 1) {
    std::fprintf(stderr, "usage: generate MODEL IDS [--max-new N]   (IDS: the prompt's token ids, e.g. 2,818,5279)\n");
    return 2;
  }
  try {
    return generate(args[0], parse_token_ids(args[1]), max_new);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "generate: %s\n", e.what());
    return 1;
  }
}
