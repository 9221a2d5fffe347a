// x @ W^T through sgemm, W cold (a round over 8 weights), GFLOP/s per K:
// weight_rows_sweep <threads> <M> <N> <K...>; PAD=n pads W's rows by n floats (ld = K + n).
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(atoi(argv[1]));
  int M = atoi(argv[2]), N = atoi(argv[3]); int PAD = getenv("PAD") ? atoi(getenv("PAD")) : 0;
  std::mt19937 g(1); std::uniform_real_distribution<float> d(-1, 1);
  const int NW = 8;
  for (int a = 4; a < argc; ++a) {
    int K = atoi(argv[a]); int LD = K + PAD;
    std::vector<std::vector<float>> W(NW, std::vector<float>(size_t(N) * (K + PAD)));
    for (auto& w : W) for (auto& v : w) v = d(g);
    std::vector<float> X(size_t(M) * K), C(size_t(M) * N);
    for (auto& v : X) v = d(g);
    std::vector<double> ts;
    for (int it = 0; it < 30; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      for (int w = 0; w < NW; ++w) sgemm(M, N, K, 1.0f, X.data(), K, 1, W[w].data(), 1, LD, C.data(), N, false);
      auto t1 = std::chrono::steady_clock::now();
      ts.push_back(std::chrono::duration<double>(t1 - t0).count() / NW);
    }
    std::sort(ts.begin(), ts.end());
    printf("K=%d %.1f  ", K, 2.0 * M * N * K / ts[15] / 1e9);
  }
  printf("\n");
}
