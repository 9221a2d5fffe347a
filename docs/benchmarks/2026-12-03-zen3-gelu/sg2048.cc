// Zenith sgemm at n^3, 2 threads: mode 0 = B prepacked (as the machine workload), 1 = A prepacked. ./sg2048 n mode reps
// (g++ -O2 -std=c++17 -march=x86-64-v3 -I csrc sg2048.cc build/cpp/libzenith_core.a -fopenmp -o sg2048)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  int64_t n = argc > 1 ? atol(argv[1]) : 2048; int mode = argc > 2 ? atoi(argv[2]) : 0; int reps = argc > 3 ? atoi(argv[3]) : 10;
  set_num_threads(2);
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  PackedOperand pb = sgemm_pack_b(n, n, b.data(), n, 1);
  PackedOperand pa = sgemm_pack_a(n, n, a.data(), n, 1);
  double best = 1e9;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    if (mode == 0) sgemm(n, n, n, 1.0f, a.data(), n, 1, b.data(), n, 1, c.data(), n, false, &pb, nullptr);
    else sgemm(n, n, n, 1.0f, a.data(), n, 1, b.data(), n, 1, c.data(), n, false, &pa, nullptr);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("n %ld mode %s: %.1f GFLOP/s\n", long(n), mode ? "A prepacked, B packed per call" : "B prepacked", 2.0 * n * n * n / best / 1e9);
}
