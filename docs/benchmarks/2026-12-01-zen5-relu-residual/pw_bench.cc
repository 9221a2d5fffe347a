// One 1x1 conv on one thread, median of calls: g++ -O2 -std=c++17 -Icsrc pw1_bench.cc build/cpp/libzenith_core.a -fopenmp
// then ./a.out C OC HW iterations (ZENITH_NO_AVX512=1 for the AVX2 path; ZX_OLD1=1 with ab_old1.diff applied: the tile).
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(atoi(argv[5])); int N = atoi(argv[6]);
  int C = atoi(argv[1]), OC = atoi(argv[2]), HW = atoi(argv[3]), iters = atoi(argv[4]);
  const int64_t L = nchwc_block();
  NchwcConvGeom g; g.N = N; g.C = C; g.H = g.W = HW; g.OC = OC; g.OH = g.OW = HW; g.KH = g.KW = 1; g.L = L;
  std::vector<float> x(size_t(N) * C * HW * HW), w(size_t(OC) * C), sc(OC, 0.5f), sh(OC, 0.1f), out(size_t(N) * OC * HW * HW), res(getenv("RES") ? size_t(N) * OC * HW * HW : 0, 0.25f);
  for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) v = rand() / float(RAND_MAX) - 0.5f;
  PackedOperand p = conv2d_nchwc_pack(g, w.data());
  double flop = 2.0 * N * C * OC * HW * HW;
  std::vector<double> t;
  for (int it = 0; it < iters; ++it) {
    auto t0 = std::chrono::steady_clock::now();
    conv2d_nchwc(g, x.data(), p, sc.data(), sh.data(), res.empty() ? nullptr : res.data(), getenv("NOACT") ? Activation::kNone : Activation::kRelu, out.data());
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  printf("%d->%d @%d: %.1f us %.1f GF/s\n", C, OC, HW, t[t.size()/2]*1e6, flop / t[t.size()/2] / 1e9);
}
