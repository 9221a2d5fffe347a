// (g++ -O2 -std=c++17 -march=x86-64-v3 -I csrc uk_rate.cc build/cpp/libzenith_core.a -fopenmp -o uk_rate)
// ./uk_rate KERNEL M N K kc
// one micro-kernel alone over a product (GemmUkernelCase), one thread: GFLOP/s
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "zenith/kernels/gemm_ukernels.h"
using namespace zenith;
int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "f32_gemm_6x16__avx2";
  int64_t M = argc > 2 ? atol(argv[2]) : 240, N = argc > 3 ? atol(argv[3]) : 256, K = argc > 4 ? atol(argv[4]) : 256;
  int64_t kc = argc > 5 ? atol(argv[5]) : 256;
  std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
  GemmUkernelCase uc(gemm_ukernel_index(name), M, N, K, a.data(), K, b.data(), N, kc);
  double best = 1e9;
  for (int rep = 0; rep < 200; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    uc.run(c.data(), N, false);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("%s M%ld N%ld K%ld kc%ld: %.1f GFLOP/s\n", name, long(M), long(N), long(K), long(kc), 2.0 * M * N * K / best / 1e9);
}
