// x @ W^T + b (+ GELU) by sgemm's weight-rows driver, W cold (16 copies in turn), 2 threads:
// median and p25 GFLOP/s over rounds. ./wrows M N K [gelu]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  const int64_t M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
  const bool gelu = argc > 4;
  const int copies = getenv("COPIES") ? atoi(getenv("COPIES")) : 16;
  std::vector<float> x(size_t(M * K), 0.5f), w(size_t(copies * N * K), 0.25f), b(size_t(N), 0.1f), c(size_t(M * N));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float((i * 7919) % 97) / 97.0f - 0.5f;
  GemmEpilogue ep;
  ep.col_shift = b.data();
  if (gelu) ep.act = Activation::kGelu;
  std::vector<double> t;
  for (int r = 0; r < 400; ++r) {
    const float* wc = w.data() + (r % copies) * N * K;
    auto a = std::chrono::steady_clock::now();
    sgemm(M, N, K, 1.0f, x.data(), K, 1, wc, 1, K, c.data(), N, false, nullptr, &ep);
    auto e = std::chrono::steady_clock::now();
    if (r >= 32) t.push_back(std::chrono::duration<double>(e - a).count());
  }
  std::sort(t.begin(), t.end());
  const double f = 2.0 * M * N * K / 1e9;
  std::printf("%s %ldx%ldx%ld%s: median %.1f us %.1f GFLOP/s, p10 %.1f us %.1f GFLOP/s\n", sgemm_isa(), long(M), long(N),
              long(K), gelu ? " +gelu" : "", t[t.size() / 2] * 1e6, f / t[t.size() / 2], t[t.size() / 10] * 1e6,
              f / t[t.size() / 10]);
}
