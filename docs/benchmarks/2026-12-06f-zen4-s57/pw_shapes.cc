// ResNet-50's stride-1 1x1 convs at batch N over the blocked layout (conv2d_nchwc, this machine's block), scale,
// shift and ReLU, filters cycled over copies totalling ~64 MiB (out of L3, as in the model) unless WARM=1; medians of
// 200 calls, GMAC/s and the share of 2 x one core's FMA rate given as argv[2] (GMAC/s). T1=1: one thread; RES=1
// a residual added (a bottleneck's last conv).
// ./pw_shapes N RATE [C OC HW]
// g++ -O2 -std=c++20 -mavx2 -mfma -fopenmp -I ../../../csrc pw_shapes.cc ../../../build/cpp/libzenith_core.a -o pw_shapes
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  const bool t1 = getenv("T1") != nullptr;
  set_num_threads(t1 ? 1 : 2);
  const int64_t N = argc > 1 ? atoll(argv[1]) : 1;
  const double rate = (argc > 2 ? atof(argv[2]) : 58.6) * (t1 ? 1 : 2);
  struct S { int64_t C, OC, HW; };  // HW: the output map's side; KS=3 (env): 3x3 stride-2 convs onto it
  std::vector<S> shapes = {{64, 256, 56}, {256, 64, 56}, {128, 512, 28}, {512, 128, 28}, {256, 1024, 14},
                           {1024, 256, 14}, {512, 2048, 7}, {2048, 512, 7}};
  if (argc > 5) shapes = {{atoll(argv[3]), atoll(argv[4]), atoll(argv[5])}};
  const int64_t L = nchwc_block();
  for (const S& s : shapes) {
    NchwcConvGeom g;
    const int64_t ks = getenv("KS") ? atoll(getenv("KS")) : 1, st = ks == 1 ? 1 : 2, in_hw = s.HW * st;
    g.N = N; g.C = s.C; g.H = g.W = in_hw; g.OC = s.OC; g.OH = g.OW = s.HW; g.KH = g.KW = ks; g.L = L;
    g.st = {st, st}; g.pd = {ks / 2, ks / 2};
    const int64_t copies = getenv("WARM") ? 1 : std::max<int64_t>(2, (int64_t(64) << 20) / (s.C * s.OC * ks * ks * 4));
    std::vector<float> x(size_t(N * s.C * in_hw * in_hw)), w(size_t(s.OC * s.C * ks * ks)), sc(size_t(s.OC), 0.5f), sh(size_t(s.OC), 0.1f);
    std::vector<float> out(size_t(N * s.OC * s.HW * s.HW)), res(getenv("RES") ? out.size() : 0, 0.25f);
    for (auto& v : x) v = float(rand()) / float(RAND_MAX) - 0.5f;
    std::vector<PackedOperand> p;
    for (int64_t i = 0; i < copies; ++i) {
      for (auto& v : w) v = float(rand()) / float(RAND_MAX) - 0.5f;
      p.push_back(conv2d_nchwc_pack(g, w.data()));
    }
    std::vector<double> t;
    for (int it = 0; it < 240; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      conv2d_nchwc(g, x.data(), p[size_t(it % copies)], sc.data(), sh.data(), res.empty() ? nullptr : res.data(), Activation::kRelu,
                   out.data());
      auto t1c = std::chrono::steady_clock::now();
      if (it >= 40) t.push_back(std::chrono::duration<double, std::micro>(t1c - t0).count());
    }
    std::sort(t.begin(), t.end());
    const double macs = double(N) * s.C * s.OC * s.HW * s.HW * ks * ks, med = t[t.size() / 2];
    std::printf("N%ld L%ld %4ld->%4ld @%2ld: median %8.1f us  p10 %8.1f  %6.1f GMAC/s  %5.1f%% of FMA\n", long(N), long(L),
                long(s.C), long(s.OC), long(s.HW), med, t[t.size() / 10], macs / med * 1e-3, 100 * macs / med * 1e-3 / rate);
  }
}
