// (g++ -O2 -std=c++17 -march=x86-64-v3 -I csrc wrows_ab.cc build/cpp/libzenith_core.a -fopenmp -o wrows_ab; needs kcw_switch.diff applied)
// ./wrows_ab rounds nw VALUE... (ZENITH_EXP_KCW: 0 = KC (256, the old way), else the cap on the k block)
// x @ W^T (nn.Linear layout, W read in place: sgemm_weight_rows), 2 threads, W of each shape cycled over `nw` copies
// (cold-ish: from L3), ZENITH_EXP_KCW values alternated per round: median GFLOP/s per shape and value.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 15, nw = argc > 2 ? atoi(argv[2]) : 4;
  std::vector<std::string> vals;
  for (int i = 3; i < argc; ++i) vals.push_back(argv[i]);
  if (vals.empty()) vals = {"0", "768"};
  set_num_threads(2);
  struct S { int64_t M, N, K; };
  std::vector<S> shapes = {{128, 384, 384}, {128, 1536, 384}, {128, 384, 1536}, {32, 384, 384}, {32, 1536, 384},
                           {32, 384, 1536}, {128, 768, 768}, {128, 3072, 768}, {128, 768, 3072}};
  for (auto s : shapes) {
    std::vector<float> x(s.M * s.K, 0.5f), c(s.M * s.N);
    std::vector<std::vector<float>> w(nw, std::vector<float>(s.N * s.K, 0.25f));
    std::vector<std::vector<double>> t(vals.size());
    for (int r = 0; r < rounds; ++r)
      for (size_t v = 0; v < vals.size(); ++v) {
        setenv("ZENITH_EXP_KCW", vals[v].c_str(), 1);
        int reps = std::max<int64_t>(4, 2e8 / (2 * s.M * s.N * s.K));
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i)
          sgemm(s.M, s.N, s.K, 1.0f, x.data(), s.K, 1, w[i % nw].data(), 1, s.K, c.data(), s.N, false, nullptr, nullptr);
        t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
      }
    std::printf("%4ldx%4ldx%4ld:", long(s.M), long(s.N), long(s.K));
    for (size_t v = 0; v < vals.size(); ++v) {
      std::sort(t[v].begin(), t[v].end());
      std::printf("  kcw %s %.1f", vals[v].c_str(), 2.0 * s.M * s.N * s.K / t[v][t[v].size() / 2] / 1e9);
    }
    std::printf("\n");
  }
}
