// Paired A/B in one process of an env setting on x @ W^T read in place (the weight-rows driver), W cold-ish:
// args M N K rounds VAR VALUE_A VALUE_B [act]
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace zenith;
int main(int argc, char** argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), rounds = atoi(argv[4]);
  const char *var = argv[5], *va = argv[6], *vb = argv[7];
  set_num_threads(2);
  std::vector<float> x(size_t(M) * K), w(size_t(N) * K), bias(N, 0.1f), c(size_t(M) * N), c0(size_t(M) * N);
  for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) v = (rand() / float(RAND_MAX) - 0.5f) * 0.1f;
  GemmEpilogue ep; ep.col_shift = bias.data(); ep.act = argc > 8 && atoi(argv[8]) ? Activation::kGelu : Activation::kNone;
  std::vector<double> ta, tb, ratio;
  for (int r = 0; r < rounds; ++r) {
    for (int v = 0; v < 2; ++v) {
      setenv(var, v == (r & 1) ? va : vb, 1);
      const bool is_a = v == (r & 1);
      auto t0 = std::chrono::steady_clock::now();
      sgemm(M, N, K, 1.f, x.data(), K, 1, w.data(), 1, K, is_a ? c0.data() : c.data(), N, false, nullptr, &ep);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      (is_a ? ta : tb).push_back(t);
    }
    ratio.push_back(tb.back() / ta.back());
  }
  double md = 0; for (size_t i = 0; i < c.size(); ++i) md = std::max(md, double(std::abs(c[i] - c0[i])));
  std::sort(ta.begin(), ta.end()); std::sort(tb.begin(), tb.end()); std::sort(ratio.begin(), ratio.end());
  printf("%dx%dx%d %s=%s %.1f us, %s=%s %.1f us, ratio %.3f [%.3f, %.3f], maxdiff %g\n", M, N, K, var, va, ta[rounds / 2] * 1e6,
         var, vb, tb[rounds / 2] * 1e6, ratio[rounds / 2], ratio[rounds / 4], ratio[3 * rounds / 4], md);
}
