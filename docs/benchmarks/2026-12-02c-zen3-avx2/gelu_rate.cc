// gelu_exact_n alone, one thread, ns per value (g++ -O2 -std=c++17 -I csrc gelu_rate.cc build/cpp/libzenith_core.a -fopenmp)
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
#include "zenith/kernels/activation.h"
using namespace zenith;
int main() {
  for (int64_t n : {768L, 8192L, 98304L}) {
    std::vector<float> x(n), y(n); std::mt19937 r(1); std::normal_distribution<float> nd;
    for (auto& v : x) v = nd(r) * 2;
    double best = 1e9;
    for (int rep = 0; rep < 400; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 20; ++i) gelu_exact_n(x.data(), y.data(), n);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20);
    }
    std::printf("gelu_exact_n n=%ld: %.3f ns/value\n", long(n), best / n * 1e9);
  }
}
