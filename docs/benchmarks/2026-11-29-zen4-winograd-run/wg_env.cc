// Interleaved A/B of an env switch on one Winograd conv (caches flushed): ./a.out C HW N rounds VAR
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
  int C = atoi(argv[1]), HW = atoi(argv[2]), N = atoi(argv[3]), rounds = atoi(argv[4]); const char* var = argv[5];
  const int64_t L = nchwc_block();
  NchwcConvGeom g; g.N = N; g.C = C; g.H = g.W = HW; g.OC = C; g.OH = g.OW = HW; g.KH = g.KW = 3; g.L = L; g.pd = {1, 1};
  std::vector<float> x(size_t(N) * C * HW * HW), w(size_t(C) * C * 9), sc(C, 0.5f), sh(C, 0.1f), out(x.size()), o0(x.size());
  for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) v = rand() / float(RAND_MAX) - 0.5f;
  PackedOperand p = conv3x3_winograd_nchwc_pack(g, w.data(), 4);
  std::vector<double> t[2];
  std::vector<float> flush(size_t(64) << 20 >> 2, 1.0f);
  for (int r = 0; r < rounds; ++r)
    for (int v = 0; v < 2; ++v) {
      if (v) setenv(var, argc > 6 ? argv[6] : "1", 1); else unsetenv(var);
      for (auto& f : flush) f += 1.0f;
      auto t0 = std::chrono::steady_clock::now();
      conv3x3_winograd_nchwc(g, x.data(), p, sc.data(), sh.data(), nullptr, Activation::kRelu, v ? out.data() : o0.data());
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  double md = 0; for (size_t i = 0; i < out.size(); ++i) md = std::max(md, double(std::abs(out[i] - o0[i])));
  std::vector<double> ratio;
  for (int r = 0; r < rounds; ++r) ratio.push_back(t[1][r] / t[0][r]);
  std::sort(ratio.begin(), ratio.end());
  for (int v = 0; v < 2; ++v) std::sort(t[v].begin(), t[v].end());
  printf("%d@%d N%d off %.3f ms  %s %.3f ms  ratio %.3f [p25 %.3f p75 %.3f]  maxdiff %g\n", C, HW, N, t[0][rounds/2]*1e3, var, t[1][rounds/2]*1e3,
         ratio[rounds / 2], ratio[rounds / 4], ratio[3 * rounds / 4], md);
}
