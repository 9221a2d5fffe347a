// In-process A/B of transpose_block's register path for a block's last 2-7 rows
// (9758ba6) on x @ W^T + bias (nn.Linear, W read in place: sgemm's weight-rows driver,
// whose AVX2 strips are 6 rows), encoder shapes. Rounds interleaved, 10 calls each;
// prints per-variant medians and the median per-round new/old ratio with its p25-p75.
// From the repository root, with the C++ tree built (README: cmake ... -DZENITH_BUILD_TESTS=ON):
//   git apply docs/benchmarks/2026-11-26-zen4-gemm-strips-mask/ab_switches.diff
//   cmake --build build/cpp -j 2 --target zenith_core
//   g++ -O2 -std=c++17 -march=x86-64-v3 -Icsrc <this file> build/cpp/libzenith_core.a -fopenmp -o /tmp/gemm_ab
//   [ZENITH_NO_AVX512=1] /tmp/gemm_ab 2
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "zenith/kernels/gemm_internal.h"
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  const int T = argc > 1 ? atoi(argv[1]) : 2;
  set_num_threads(T);
  const int64_t shapes[][3] = {{128, 384, 384},  {128, 1152, 384}, {128, 1536, 384}, {128, 384, 1536}, {128, 768, 768},
                               {128, 2304, 768}, {128, 3072, 768}, {128, 768, 3072}, {32, 1536, 384},  {32, 384, 1536}};
  std::mt19937 rng(0);
  std::normal_distribution<float> nd;
  for (auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    std::vector<float> x(static_cast<size_t>(M * K)), w(static_cast<size_t>(N * K)), bias(static_cast<size_t>(N)),
        c1(static_cast<size_t>(M * N)), c2(static_cast<size_t>(M * N));
    for (auto* v : {&x, &w, &bias})
      for (auto& f : *v) f = nd(rng);
    GemmEpilogue ep;
    ep.col_shift = bias.data();
    auto run = [&](std::vector<float>& c) {
      sgemm(M, N, K, 1.0f, x.data(), K, 1, w.data(), 1, K, c.data(), N, false, nullptr, &ep);
    };
    std::vector<double> told, tnew, ratio;
    for (int r = 0; r < 41; ++r) {
      gemm_detail::zt_old = true;
      double t0 = now();
      for (int i = 0; i < 10; ++i) run(c2);
      double t1 = now();
      gemm_detail::zt_old = false;
      for (int i = 0; i < 10; ++i) run(c1);
      double t2 = now();
      told.push_back((t1 - t0) / 10);
      tnew.push_back((t2 - t1) / 10);
      ratio.push_back((t2 - t1) / (t1 - t0));
    }
    for (auto* v : {&told, &tnew, &ratio}) std::sort(v->begin(), v->end());
    int64_t differ = 0;
    for (size_t i = 0; i < c1.size(); ++i) differ += c1[i] != c2[i];
    const double gf = 2.0 * double(M * N * K) / 1e9;
    std::printf("%ldx%ldx%ld T=%d  old %.1f  new %.1f GFLOP/s  new/old %.3f (p25 %.3f, p75 %.3f)  values differing %ld\n",
                long(M), long(N), long(K), T, gf / told[20], gf / tnew[20], ratio[20], ratio[10], ratio[30], long(differ));
  }
}
