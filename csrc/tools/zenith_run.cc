// zenith-run: runs a Zenith model file (zenith.export) with the C++ runtime alone, no Python.
//
//   zenith-run MODEL [--input IN.safetensors] [--output OUT.safetensors] [--random]
//              [--dim SYMBOL=N ...] [--threads T] [--iterations N] [--warmup W]
//
// --threads defaults to OpenMP's count: OMP_NUM_THREADS, else the CPUs this process may run on.
// Without --input or --random it prints the model's inputs and outputs. Inputs come from a
// safetensors file by the model's input names (--random: floats uniform in [-1, 1), integers
// and booleans zero, a fixed seed; a model with symbolic dims takes each symbol's size from
// --dim, e.g. --dim s0=8). Outputs go to a safetensors file as "0", "1", ...
// --iterations N times N calls after W warm-up calls (default 3) and prints the median and
// the 10th / 90th percentiles in ms. Exit status 0, or 1 with the error on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "zenith/error.h"
#include "zenith/model_file.h"
#include "zenith/threadpool.h"

namespace {

using namespace zenith;

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "zenith-run: %s\nusage: zenith-run MODEL [--input IN.safetensors] [--output OUT.safetensors] "
               "[--random] [--dim SYMBOL=N ...] [--threads T] [--iterations N] [--warmup W]\n",
               why);
  std::exit(2);
}

int run(int argc, char** argv) {
  std::string model_path, in_path, out_path;
  bool random = false;
  int threads = 0, iterations = 0, warmup = 3;
  std::map<std::string, int64_t> dims;  // --dim: symbol -> size
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    auto count = [&](int lo) {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < lo || n > 1000000) usage((a + " takes a whole number, got " + v).c_str());
      return int(n);
    };
    if (a == "--input") in_path = value();
    else if (a == "--output") out_path = value();
    else if (a == "--random") random = true;
    else if (a == "--dim") {
      const std::string v = value();
      const size_t eq = v.find('=');
      char* end = nullptr;
      const long long n = eq == std::string::npos ? -1 : std::strtoll(v.c_str() + eq + 1, &end, 10);
      if (eq == 0 || eq == std::string::npos || eq + 1 == v.size() || *end || n < 0)
        usage(("--dim takes SYMBOL=N with N a whole number, got " + v).c_str());
      dims[v.substr(0, eq)] = n;
    }
    else if (a == "--threads") threads = count(1);
    else if (a == "--iterations") iterations = count(0);
    else if (a == "--warmup") warmup = count(0);
    else if (a == "-h" || a == "--help") usage("runs a Zenith model file");
    else if (!a.empty() && a[0] == '-') usage(("unknown option " + a).c_str());
    else if (model_path.empty()) model_path = a;
    else usage("one model file only");
  }
  if (model_path.empty()) usage("no model file given");
  if (!in_path.empty() && random) usage("--input and --random exclude each other");
  if (!dims.empty() && !random) usage("--dim sizes --random's inputs");
  if (threads) set_num_threads(threads);  // (else the runtime's default, OpenMP's count)

  const Model model(model_path);
  if (in_path.empty() && !random) {
    std::printf("%s: Zenith model file format %s, %zu input(s), %zu output(s)\n", model_path.c_str(),
                model.metadata().at("zenith.format").c_str(), model.inputs().size(), model.num_outputs());
    for (const auto& in : model.inputs()) std::printf("  input %s: %s\n", in.name.c_str(), in.type_str().c_str());
    for (const auto& s : model.symbols())
      std::printf("  symbol %s (%s): sizes %lld..%s\n", s.name.c_str(), s.bound_by.c_str(), (long long)s.min,
                  s.max >= 0 ? std::to_string(s.max).c_str() : "");
    return 0;
  }

  std::vector<InTensor> ins;
  SafeTensorsFile in_file;  // keeps the inputs' mapping alive
  std::vector<std::vector<unsigned char>> made;
  if (!in_path.empty()) {
    in_file = read_safetensors(in_path);
    for (const auto& want : model.inputs()) {
      auto it = in_file.tensors.find(want.name);
      if (it == in_file.tensors.end()) {
        std::string names;
        for (const auto& w : model.inputs()) names += (names.empty() ? "" : ", ") + w.name;
        fail(in_path, ": has no tensor named ", want.name, " (the model's inputs: ", names, ")");
      }
      ins.push_back({it->second.data, it->second.dtype, it->second.shape});
    }
  } else {
    std::mt19937 gen(0);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::map<std::string, bool> used;
    for (const auto& [name, n] : dims) used[name] = false;
    for (const auto& want : model.inputs()) {
      std::vector<int64_t> shape = want.shape;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] >= 0) continue;  // symbolic: a symbol's size from --dim (an expression: an error)
        auto it = dims.find(want.dims[d]);
        if (it == dims.end())
          fail("input ", want.name, " is ", want.type_str(), ": give --dim ", want.dims[d],
               "=N for --random (or inputs with --input)");
        shape[d] = it->second;
        used[it->first] = true;
      }
      uint64_t bytes;  // (at most 2^40 values)
      if (!bounded_nbytes(want.dtype, shape, (uint64_t(1) << 40) * dtype_size(want.dtype), &bytes))
        fail("input ", want.name, " would be too large");
      const int64_t numel = int64_t(bytes / dtype_size(want.dtype));
      made.emplace_back(size_t(bytes), 0);
      if (want.dtype == DType::f32) {
        float* p = reinterpret_cast<float*>(made.back().data());
        for (int64_t k = 0; k < numel; ++k) p[k] = u(gen);
      } else if (is_float(want.dtype)) {
        fail("--random fills float32 inputs only; give input ", want.name, " (", dtype_name(want.dtype),
             ") with --input");
      }
      ins.push_back({made.back().data(), want.dtype, shape});
    }
    for (const auto& [name, u] : used)
      if (!u) fail("--dim ", name, ": no input dim is that symbol");
  }

  std::vector<OutTensor> outs = model.run(ins);
  if (iterations > 0) {
    for (int k = 0; k < warmup; ++k) model.run(ins);
    std::vector<double> ms;
    for (int k = 0; k < iterations; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      model.run(ins);  // returns once every kernel has finished
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return ms[std::min(ms.size() - 1, size_t(q * double(ms.size() - 1) + 0.5))]; };
    std::printf("%s: %d calls on %d thread(s): median %.3f ms, p10 %.3f, p90 %.3f\n", model_path.c_str(), iterations,
                num_threads(), at(0.5), at(0.1), at(0.9));
  }
  if (!out_path.empty()) {
    std::vector<SafeTensorOut> ts;
    for (size_t k = 0; k < outs.size(); ++k) ts.push_back({std::to_string(k), outs[k].dtype, outs[k].shape, outs[k].data});
    write_safetensors(out_path, ts, {{"zenith.model", model_path}});
  }
  for (size_t k = 0; k < outs.size(); ++k)
    std::printf("output %zu: %s%s\n", k, dtype_name(outs[k].dtype), dims_str(outs[k].shape).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zenith-run: %s\n", e.what());
    return 1;
  }
}
