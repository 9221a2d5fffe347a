// paired in-process A/B of qmatmul variants (env switch set per call), MiniLM seq-128 shapes, 2 threads
// ./qmm_ab iters VAR=VAL[,VAR=VAL] VAR=VAL ...  (variant "-" = no variables)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
static void apply(const std::string& v) {
  unsetenv("ZENITH_EXP_OLD"); unsetenv("ZENITH_EXP_G");
  if (v == "-") return;
  size_t at = 0;
  while (at < v.size()) {
    size_t c = v.find(',', at); if (c == std::string::npos) c = v.size();
    std::string kv = v.substr(at, c - at); size_t e = kv.find('=');
    setenv(kv.substr(0, e).c_str(), kv.substr(e + 1).c_str(), 1); at = c + 1;
  }
}
int main(int argc, char** argv) {
  const int iters = atoi(argv[1]);
  std::vector<std::string> vars(argv + 2, argv + argc);
  const int64_t M = 128;
  set_num_threads(2);
  struct Shape { int64_t N, K; bool gelu; const char* name; };
  const Shape shapes[] = {{1152, 384, false, "qkv"}, {384, 384, false, "o"}, {1536, 384, true, "up+gelu"}, {384, 1536, false, "down"}};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (const Shape& s : shapes) {
    const int64_t N = s.N, K = s.K;
    std::vector<float> x(M * K), y(M * N), bias(N, 0.1f);
    for (auto& v : x) v = nd(rng);
    std::vector<uint8_t> w(N * (4 + K));
    for (int64_t n = 0; n < N; ++n) {
      const float sc = 0.05f * 4 / 127;
      std::memcpy(&w[n * (4 + K)], &sc, 4);
      for (int64_t k = 0; k < K; ++k) w[n * (4 + K) + 4 + k] = uint8_t(int8_t(std::max(-127, std::min(127, int(nd(rng) * 30)))));
    }
    const QIsa isa = qisa_default();
    PackedOperand pk = qmatmul_pack_int8(w.data(), N, K, isa);
    const QMatmulPlan p = qmatmul_plan(QFormat::int8, M, N, K, isa, 0.0f, false, isa == QIsa::kAvx512);
    std::vector<std::vector<double>> ts(vars.size());
    for (int i = 0; i < iters; ++i)
      for (size_t v = 0; v < vars.size(); ++v) {
        apply(vars[v]);
        const auto t0 = std::chrono::steady_clock::now();
        qmatmul(p, x.data(), w.data(), bias.data(), y.data(), &pk, s.gelu ? Activation::kGelu : Activation::kNone);
        ts[v].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    std::printf("%-8s", s.name);
    std::vector<double> med(vars.size());
    for (size_t v = 0; v < vars.size(); ++v) { auto t = ts[v]; std::sort(t.begin(), t.end()); med[v] = t[t.size() / 2]; std::printf("  %s %.4f", vars[v].c_str(), med[v]); }
    // paired ratio of each variant to the first: median of per-iteration ratios
    for (size_t v = 1; v < vars.size(); ++v) { std::vector<double> r; for (int i = 0; i < iters; ++i) r.push_back(ts[v][i] / ts[0][i]); std::sort(r.begin(), r.end()); std::printf("  [%zu/0 %.3f]", v, r[r.size() / 2]); }
    std::printf("\n");
  }
}
