// One 3x3 stride-1 conv (C -> C on HW x HW, N images, ReLU), caches flushed before each call: Winograd F(2x2),
// F(4x4) and the direct conv, per round each once (paired). ./a.out C HW N rounds
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  int C = atoi(argv[1]), HW = atoi(argv[2]), N = atoi(argv[3]), rounds = atoi(argv[4]);
  const int64_t L = nchwc_block();
  NchwcConvGeom g; g.N = N; g.C = C; g.H = g.W = HW; g.OC = C; g.OH = g.OW = HW; g.KH = g.KW = 3; g.L = L; g.pd = {1, 1};
  std::vector<float> x(size_t(N) * C * HW * HW), w(size_t(C) * C * 9), sc(C, 0.5f), sh(C, 0.1f), out[3];
  for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) v = (rand() / float(RAND_MAX) - 0.5f) * 0.1f;
  PackedOperand p2 = conv3x3_winograd_nchwc_pack(g, w.data(), 2), p4 = conv3x3_winograd_nchwc_pack(g, w.data(), 4),
                pd = conv2d_nchwc_pack(g, w.data());
  for (auto& o : out) o.resize(x.size());
  std::vector<double> t[3];
  std::vector<float> flush(size_t(64) << 20 >> 2, 1.0f);
  for (int r = 0; r < rounds; ++r)
    for (int v = 0; v < 3; ++v) {
      for (auto& f : flush) f += 1.0f;
      auto t0 = std::chrono::steady_clock::now();
      if (v == 0) conv3x3_winograd_nchwc(g, x.data(), p2, sc.data(), sh.data(), nullptr, Activation::kRelu, out[0].data());
      if (v == 1) conv3x3_winograd_nchwc(g, x.data(), p4, sc.data(), sh.data(), nullptr, Activation::kRelu, out[1].data());
      if (v == 2) conv2d_nchwc(g, x.data(), pd, sc.data(), sh.data(), nullptr, Activation::kRelu, out[2].data());
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  std::vector<double> r1, r2;
  for (int r = 0; r < rounds; ++r) r1.push_back(t[1][r] / t[0][r]), r2.push_back(t[2][r] / t[0][r]);
  std::sort(r1.begin(), r1.end()); std::sort(r2.begin(), r2.end());
  for (auto& v : t) std::sort(v.begin(), v.end());
  double md = 0; for (size_t i = 0; i < x.size(); ++i) md = std::max(md, double(std::abs(out[2][i] - out[0][i])));
  printf("%d@%d N%d: F2 %.3f ms, F4 %.3f ms (%.3f), direct %.3f ms (%.3f [%.3f, %.3f]); direct-F2 maxdiff %g\n", C, HW, N,
         t[0][rounds / 2] * 1e3, t[1][rounds / 2] * 1e3, r1[rounds / 2], t[2][rounds / 2] * 1e3, r2[rounds / 2],
         r2[rounds / 4], r2[3 * rounds / 4], md);
}
