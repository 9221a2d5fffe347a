// quantize_act_row_avx2 alone: ns per value, x hot in L1 / L2.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include <cmath>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoll(argv[1]) : 384;
  const int64_t rows = argc > 2 ? atoll(argv[2]) : 1;
  std::mt19937 g(1); std::normal_distribution<float> nd;
  std::vector<float> x(size_t(K * rows)); for (auto& v : x) { float z = nd(g) * 3.0f; v = 0.5f * z * (1.0f + std::erf(z * 0.70710678f)); if (argc > 4 && (g() % 4 == 0)) v = 1e-40f; }
  std::vector<int8_t> q(size_t(K * rows)); std::vector<float> d(size_t(K * rows / 32)); std::vector<int16_t> s(size_t(K * rows / 16));
  double best = 1e30;
  for (int rep = 0; rep < 30; ++rep) {
    const int iters = int(2000000 / (K * rows)) + 1;
    static std::vector<float> junk(size_t(argc > 3 ? atoll(argv[3]) : 0));
    double tot = 0;
    for (int i = 0; i < iters; ++i) {
      for (auto& j : junk) j += 1.0f;
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t r = 0; r < rows; ++r)
        quantize_act_row_avx2(x.data() + r * K, K, 32, q.data() + r * K, d.data() + r * K / 32, s.data() + r * K / 16, 0.0f, 127);
      tot += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double t = tot / iters;
    best = std::min(best, t);
  }
  std::printf("K %ld rows %ld: %.3f ns a value\n", (long)K, (long)rows, best * 1e9 / double(K * rows));
}
