#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  int N = atoi(argv[1]);
  struct S { int C, OC, HW; } shapes[] = {{256, 512, 56}, {512, 1024, 28}, {1024, 2048, 14}};
  for (auto s : shapes) {
    const int64_t L = nchwc_block(), CB = s.C / L, OHW = s.HW / 2;
    NchwcConvGeom g; g.N = N; g.C = s.C; g.H = g.W = s.HW; g.OC = s.OC; g.OH = g.OW = OHW; g.KH = g.KW = 1; g.L = L; g.st = {2, 2};
    NchwcConvGeom g1 = g; g1.H = g1.W = OHW; g1.st = {1, 1};
    std::vector<float> x(size_t(N) * s.C * s.HW * s.HW), w(size_t(s.OC) * s.C), sc(s.OC, 0.5f), sh(s.OC, 0.1f);
    std::vector<float> out(size_t(N) * s.OC * OHW * OHW), out1(out.size()), xs(size_t(N) * s.C * OHW * OHW);
    for (auto& v : x) v = rand() / float(RAND_MAX) - 0.5f;
    for (auto& v : w) v = rand() / float(RAND_MAX) - 0.5f;
    PackedOperand p = conv2d_nchwc_pack(g, w.data()), p1 = conv2d_nchwc_pack(g1, w.data());
    double flop = 2.0 * N * s.C * s.OC * OHW * OHW;
    std::vector<double> ta, tb, tc;
    for (int it = 0; it < 30; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      conv2d_nchwc(g, x.data(), p, sc.data(), sh.data(), nullptr, Activation::kNone, out.data());
      auto t1 = std::chrono::steady_clock::now();
      parallel_for(N * CB * OHW, 1, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) {
          const int64_t nc = i / OHW, oh = i % OHW;
          const float* src = x.data() + (nc * s.HW + 2 * oh) * s.HW * L;
          float* dst = xs.data() + (nc * OHW + oh) * OHW * L;
          for (int64_t ow = 0; ow < OHW; ++ow) std::memcpy(dst + ow * L, src + 2 * ow * L, L * sizeof(float));
        }
      });
      auto t2 = std::chrono::steady_clock::now();
      conv2d_nchwc(g1, xs.data(), p1, sc.data(), sh.data(), nullptr, Activation::kNone, out1.data());
      auto t3 = std::chrono::steady_clock::now();
      ta.push_back(std::chrono::duration<double>(t1 - t0).count());
      tb.push_back(std::chrono::duration<double>(t2 - t1).count());
      tc.push_back(std::chrono::duration<double>(t3 - t2).count());
    }
    double md = 0; for (size_t i = 0; i < out.size(); ++i) md = std::max(md, double(std::abs(out[i] - out1[i])));
    std::sort(ta.begin(), ta.end()); std::sort(tb.begin(), tb.end()); std::sort(tc.begin(), tc.end());
    printf("N%d %4d->%4d @%2d s2: strided %7.1f us (%5.1f GF/s) | copy %6.1f + unit %7.1f = %7.1f us  maxdiff %g\n", N, s.C, s.OC, s.HW,
           ta[15] * 1e6, flop / ta[15] / 1e9, tb[15] * 1e6, tc[15] * 1e6, (tb[15] + tc[15]) * 1e6, md);
  }
}
