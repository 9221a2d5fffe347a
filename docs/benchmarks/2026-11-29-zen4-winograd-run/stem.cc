// ResNet stem 3->64 7x7 s2 p3 on 224: NCHW direct against the blocked nchw_in conv, 2 threads, interleaved.
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
  int N = atoi(argv[1]), rounds = atoi(argv[2]);
  const int64_t L = nchwc_block(), C = 3, OC = 64, H = 224, OH = 112;
  std::vector<float> x(size_t(N) * C * H * H), w(size_t(OC) * C * 49), sc(OC, 0.5f), sh(OC, 0.1f), out(size_t(N) * OC * OH * OH);
  for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
  for (auto& v : w) v = rand() / float(RAND_MAX) - 0.5f;
  DepthwiseGeom dg{H, H, 7, 7, OH, OH, 2, 2, 3, 3, 1, 1};
  GemmEpilogue ep; ep.row_scale = sc.data(); ep.row_shift = sh.data(); ep.act = Activation::kRelu;
  NchwcConvGeom g; g.N = N; g.C = C; g.H = g.W = H; g.OC = OC; g.OH = g.OW = OH; g.KH = g.KW = 7; g.L = L; g.st = {2, 2}; g.pd = {3, 3}; g.nchw_in = true;
  PackedOperand p = conv2d_nchwc_pack(g, w.data());
  std::vector<double> t[2];
  std::vector<float> flush(size_t(64) << 20 >> 2, 1.0f);
  for (int r = 0; r < rounds; ++r)
    for (int v = 0; v < 2; ++v) {
      for (auto& f : flush) f += 1.0f;
      auto t0 = std::chrono::steady_clock::now();
      if (v == 0) for (int n = 0; n < N; ++n) conv2d_direct(dg, C, OC, x.data() + n * C * H * H, w.data(), out.data() + n * OC * OH * OH, &ep);
      else conv2d_nchwc(g, x.data(), p, sc.data(), sh.data(), nullptr, Activation::kRelu, out.data());
      t[v].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  double fl = 2.0 * OC * OH * OH * C * 49 * N;
  for (int v = 0; v < 2; ++v) { std::sort(t[v].begin(), t[v].end()); double m = t[v][rounds/2]; printf("N%d %-7s %.3f ms %.1f GF/s\n", N, v ? "nchwc" : "direct", m*1e3, fl/m/1e9); }
}
