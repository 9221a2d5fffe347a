#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
using namespace zenith;
// x @ W^T over many distinct W (cold, from DRAM) vs one W (hot).
int main(int argc, char** argv) {
  int th = atoi(argv[1]); int64_t M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
  int nw = atoi(argv[5]); int packb = argc > 6 ? atoi(argv[6]) : 0;
  set_num_threads(th);
  std::vector<float> a(M*K), c(M*N);
  std::vector<std::vector<float>> w(nw, std::vector<float>(N*K));
  for (auto& x : a) x = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) for (auto& x : v) x = rand() / float(RAND_MAX) - 0.5f;
  std::vector<PackedOperand> pb(nw);
  if (packb) for (int i = 0; i < nw; ++i) pb[i] = sgemm_pack_b(K, N, w[i].data(), 1, K);
  std::vector<double> ts;
  for (int r = 0; r < 12; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < nw; ++i)
      sgemm(M, N, K, 1.0f, a.data(), K, 1, w[i].data(), 1, K, c.data(), N, false, packb ? &pb[i] : nullptr);
    auto t1 = std::chrono::steady_clock::now();
    if (r >= 2) ts.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  printf("thr %d %ldx%ldx%ld x%d packb %d: %.1f GFLOP/s\n", th, M, N, K, nw, packb, 2.0*M*N*K*nw/ts[ts.size()/2]/1e9);
}
