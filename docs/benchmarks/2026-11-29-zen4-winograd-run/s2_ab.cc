// Strided 3x3 conv over the blocked layout, 2 threads: the tile against the patch run (ZX_PATCH), interleaved.
// ./a.out C H N rounds   (OC = C, stride 2, padding 1)
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  int C = atoi(argv[1]), H = atoi(argv[2]), N = atoi(argv[3]), rounds = atoi(argv[4]);
  const int64_t L = nchwc_block();
  NchwcConvGeom g; g.N = N; g.C = C; g.H = g.W = H; g.OC = C; g.OH = g.OW = (H - 1) / 2 + 1; g.KH = g.KW = 3; g.L = L;
  g.st = {2, 2}; g.pd = {1, 1};
  std::vector<float> x(size_t(N) * C * H * H), w(size_t(C) * C * 9), sc(C, 0.5f), sh(C, 0.1f), out(size_t(N) * C * g.OH * g.OW);
  for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) v = rand() / float(RAND_MAX) - 0.5f;
  PackedOperand p = conv2d_nchwc_pack(g, w.data());
  double flop = 2.0 * C * C * 9 * g.OH * g.OW * N;
  std::vector<double> t[2];
  std::vector<float> flush(size_t(32) << 20 >> 2, 1.0f);
  for (int r = 0; r < rounds; ++r)
    for (int v = 0; v < 2; ++v) {
      if (v) setenv("ZX_PATCH", "1", 1); else unsetenv("ZX_PATCH");
      for (auto& f : flush) f += 1.0f;
      auto t0 = std::chrono::steady_clock::now();
      conv2d_nchwc(g, x.data(), p, sc.data(), sh.data(), nullptr, Activation::kRelu, out.data());
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  std::vector<double> ratio;
  for (int r = 0; r < rounds; ++r) ratio.push_back(t[1][r] / t[0][r]);
  std::sort(ratio.begin(), ratio.end());
  for (int v = 0; v < 2; ++v) {
    std::sort(t[v].begin(), t[v].end());
    double m = t[v][t[v].size() / 2];
    printf("%d@%d s2 N%d %-6s median %.3f ms %.1f GF/s\n", C, H, N, v ? "patch" : "tile", m * 1e3, flop / m / 1e9);
  }
  printf("  ratio patch/tile %.3f [p25 %.3f p75 %.3f]\n", ratio[rounds / 2], ratio[rounds / 4], ratio[3 * rounds / 4]);
}
