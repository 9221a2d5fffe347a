// Paired A/B in one process: addmm x[M,K] @ W^T + bias, GELU, per round once with ZX_ROWGELU unset and once set.
// args M N K rounds nopack(0/1)
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace zenith;
int main(int argc, char** argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), rounds = atoi(argv[4]), nopack = atoi(argv[5]);
  set_num_threads(2);
  std::vector<float> x(size_t(M) * K), w(size_t(N) * K), bias(N, 0.1f), c(size_t(M) * N);
  for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) v = (rand() / float(RAND_MAX) - 0.5f) * 0.1f;
  PackedOperand p = sgemm_pack_b(K, N, w.data(), 1, K);
  GemmEpilogue ep; ep.col_shift = bias.data(); ep.act = Activation::kGelu;
  GemmEpilogue ep0; ep0.col_shift = bias.data();
  std::vector<double> t[3], ratio[2];
  auto run = [&](const GemmEpilogue& e) {
    auto t0 = std::chrono::steady_clock::now();
    sgemm(M, N, K, 1.f, x.data(), K, 1, w.data(), 1, K, c.data(), N, false, nopack ? nullptr : &p, &e);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int r = 0; r < rounds; ++r) {
    double a, b, z;
    unsetenv("ZX_ROWGELU"); a = run(ep);
    setenv("ZX_ROWGELU", "1", 1); b = run(ep);
    unsetenv("ZX_ROWGELU"); z = run(ep0);
    t[0].push_back(a), t[1].push_back(b), t[2].push_back(z), ratio[0].push_back(b / a), ratio[1].push_back(z / a);
  }
  for (auto& v : t) std::sort(v.begin(), v.end());
  for (auto& v : ratio) std::sort(v.begin(), v.end());
  printf("%dx%dx%d %s: block %.1f us, rows %.1f us, no GELU %.1f us; rows/block %.3f [%.3f, %.3f], none/block %.3f\n", M, N, K,
         nopack ? "in place" : "packed", t[0][rounds / 2] * 1e6, t[1][rounds / 2] * 1e6, t[2][rounds / 2] * 1e6,
         ratio[0][rounds / 2], ratio[0][rounds / 4], ratio[0][3 * rounds / 4], ratio[1][rounds / 2]);
}
