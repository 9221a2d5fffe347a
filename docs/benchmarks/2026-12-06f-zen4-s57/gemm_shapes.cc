// x @ W^T + bias (addmm's call of sgemm) at the encoders' shapes, 2 threads, W cycled over copies totalling
// ~64 MiB (out of L3, as in a model), X and the bias warm. Prints per shape the median and p10 of 400 calls
// in us and GFLOP/s, and the share of the machine's peak given as argv[1] (GFLOP/s, the `machine` workload's).
// Environment: T1=1 one thread; WARM=1 one copy of W; TX=1 X given transposed (a_rs 1); ZENITH_AB_XT (the session's
// temporary switch: 0 X^T packed by one thread per panel as before, 1 packing split, unset: whole panels in place).
// g++ -O2 -std=c++20 -mavx2 -mfma -fopenmp -I ../../../csrc gemm_shapes.cc ../../../build/cpp/libzenith_core.a -o gemm_shapes
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"

int main(int argc, char** argv) {
  const double peak = argc > 1 ? atof(argv[1]) : 210.3;
  zenith::set_num_threads(getenv("T1") ? 1 : 2);
  const bool tx = getenv("TX") != nullptr;
  struct Shape { int64_t M, N, K; };
  std::vector<Shape> shapes = {{32, 384, 384}, {32, 1536, 384}, {32, 384, 1536}, {32, 1152, 384},
                               {128, 384, 384}, {128, 1536, 384}, {128, 384, 1536}, {128, 1152, 384},
                               {128, 768, 768}, {128, 3072, 768}, {128, 768, 3072}};
  if (argc > 4) shapes = {{atoll(argv[2]), atoll(argv[3]), atoll(argv[4])}};
  for (const Shape& s : shapes) {
    const int64_t copies = getenv("WARM") ? 1 : std::max<int64_t>(2, (int64_t(64) << 20) / (s.N * s.K * 4));
    std::vector<float> w(size_t(copies * s.N * s.K)), x(size_t(s.M * s.K)), bias(size_t(s.N)), c(size_t(s.M * s.N));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 2654435761u % 2001) - 1000) * 1e-4f;
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 40503u % 2001) - 1000) * 1e-3f;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * float(i % 7);
    zenith::GemmEpilogue ep;
    ep.col_shift = bias.data();
    std::vector<double> t;
    for (int it = 0; it < 440; ++it) {
      const float* wi = w.data() + (it % copies) * s.N * s.K;
      auto t0 = std::chrono::steady_clock::now();
      if (tx)  // X given transposed (X^T [K, M] row-major), as a feed-forward pair's down projection reads h^T
        zenith::sgemm(s.M, s.N, s.K, 1.0f, x.data(), 1, s.M, wi, 1, s.K, c.data(), s.N, false, nullptr, &ep);
      else
        zenith::sgemm(s.M, s.N, s.K, 1.0f, x.data(), s.K, 1, wi, 1, s.K, c.data(), s.N, false, nullptr, &ep);
      auto t1 = std::chrono::steady_clock::now();
      if (it >= 40) t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2], p10 = t[t.size() / 10], flop = 2.0 * s.M * s.N * s.K;
    std::printf("%4ldx%4ldx%4ld  median %8.1f us  p10 %8.1f  %6.1f GFLOP/s (%5.1f%% of %.1f; p10 %5.1f%%)\n", long(s.M),
                long(s.N), long(s.K), med, p10, flop / med * 1e-3, 100 * flop / med * 1e-3 / peak, peak,
                100 * flop / p10 * 1e-3 / peak);
  }
}
