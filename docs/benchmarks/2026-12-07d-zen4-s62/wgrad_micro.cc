// conv2d_weight_grad at ResNet-18's shapes (batch N, S px), in one process, calls
// alternating between the paths before this session (ZENITH_WGRAD_CL=0: B from the
// phase-split input; ZENITH_WGRAD_SPLIT=0: maps of 512+ pixels image by image, threads
// splitting each GEMM) and after (both 1); median ms of 31 calls, GFLOP/s, after / before.
// The sum weights each layer by its count in ResNet-18. Usage: wgrad_micro [N S].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  int64_t N = argc > 1 ? atoi(argv[1]) : 8, S = argc > 2 ? atoi(argv[2]) : 112;
  struct L { int64_t C, OC, H, K, s, p, count; const char* name; };
  int64_t m = S / 4;  // layer1 map
  std::vector<L> ls = {{3, 64, S, 7, 2, 3, 1, "stem"},          {64, 64, m, 3, 1, 1, 4, "l1 3x3"},
                       {64, 128, m, 3, 2, 1, 1, "l2 s2"},        {64, 128, m, 1, 2, 0, 1, "l2 ds"},
                       {128, 128, m / 2, 3, 1, 1, 3, "l2 3x3"},  {128, 256, m / 2, 3, 2, 1, 1, "l3 s2"},
                       {256, 256, m / 4, 3, 1, 1, 3, "l3 3x3"},  {256, 512, m / 4, 3, 2, 1, 1, "l4 s2"},
                       {512, 512, (m / 4 + 1) / 2, 3, 1, 1, 3, "l4 3x3"}, {128, 256, m / 2, 1, 2, 0, 1, "l3 ds"},
                       {256, 512, m / 4, 1, 2, 0, 1, "l4 ds"}};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  double tot[2] = {0, 0};
  for (auto& l : ls) {
    int64_t OH = (l.H + 2 * l.p - l.K) / l.s + 1;
    ConvGradGeom g{N, l.C, l.H, l.H, l.OC, OH, OH, l.K, l.K, l.s, l.s, l.p, l.p, 1, 1, 1};
    std::vector<float> x(N * l.C * l.H * l.H), gy(N * l.OC * OH * OH), dw(l.OC * l.C * l.K * l.K);
    for (auto& v : x) v = nd(rng);
    for (auto& v : gy) v = nd(rng);
    std::vector<double> t[2];
    for (int r = 0; r < 31; ++r)
      for (int a = 0; a < 2; ++a) {
        setenv("ZENITH_WGRAD_CL", a ? "1" : "0", 1);
        setenv("ZENITH_WGRAD_SPLIT", a ? "1" : "0", 1);
        auto t0 = std::chrono::steady_clock::now();
        conv2d_weight_grad(g, gy.data(), x.data(), dw.data());
        t[a].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    double fl = 2.0 * l.OC * l.C * l.K * l.K * N * OH * OH;
    double md[2];
    for (int a = 0; a < 2; ++a) {
      std::sort(t[a].begin(), t[a].end());
      md[a] = t[a][15];
      tot[a] += md[a] * l.count;
    }
    printf("%-8s C%4ld OC%4ld %3ldx%-3ld k%ld s%ld: before %7.3f ms %6.1f GF/s | after %7.3f ms %6.1f GF/s | %.3f\n",
           l.name, l.C, l.OC, OH, OH, l.K, l.s, md[0], fl / md[0] / 1e6, md[1], fl / md[1] / 1e6, md[1] / md[0]);
  }
  printf("ResNet-18 sum: before %.2f ms, after %.2f ms (%.3f)\n", tot[0], tot[1], tot[1] / tot[0]);
}
