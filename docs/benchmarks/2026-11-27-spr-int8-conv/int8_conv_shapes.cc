// conv2d_int8 at ResNet-50's shapes against qmatmul (static, uniform rows) on the same
// M x OC x K: what the conv spends beyond its GEMM.
// g++ -O2 -std=c++17 -march=x86-64-v3 -Icsrc int8_conv_shapes.cc build/cpp/libzenith_core.a -fopenmp -o convbench
// ./convbench BATCH COLD [SHAPE]: COLD 1 writes 64 MiB between calls; SHAPE runs one row
// of the table; NOGEMM=1 skips the qmatmul comparison (for perf). The before/after figures
// in the diary are two such binaries, linked against the library before and after the
// change, run in turn (3 rounds), medians of the conv column.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
struct S { int C, H, OC, k, s; };
int main(int argc, char** argv) {
  const int N = argc > 1 ? atoi(argv[1]) : 8;
  set_num_threads(2);
  S shapes[] = {{64, 56, 64, 3, 1}, {128, 56, 128, 3, 2}, {128, 28, 512, 1, 1}, {512, 28, 128, 1, 1},
                {128, 28, 128, 3, 1}, {256, 56, 512, 1, 2}, {256, 14, 1024, 1, 1}, {1024, 14, 256, 1, 1},
                {256, 14, 256, 3, 1}, {512, 7, 2048, 1, 1}, {2048, 7, 512, 1, 1}, {512, 7, 512, 3, 1}};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  const QIsa isa = qisa_default();
  const bool cold = argc > 2 && atoi(argv[2]);
  std::vector<float> flush(size_t(64) << 20 >> 2, 1.0f);
  const int only = argc > 3 ? atoi(argv[3]) : -1;
  int idx = -1;
  for (const S& sh : shapes) {
    if (++idx, only >= 0 && idx != only) continue;
    Conv2dInt8Geom g;
    g.N = N, g.C = sh.C, g.H = g.W = sh.H, g.OC = sh.OC, g.KH = g.KW = sh.k;
    g.st = {sh.s, sh.s}, g.pd = {sh.k / 2, sh.k / 2};
    g.OH = g.OW = (sh.H + 2 * g.pd[0] - sh.k) / sh.s + 1;
    const int64_t K = g.K(), M = int64_t(N) * g.OH * g.OW;
    std::vector<float> x(size_t(N) * sh.C * sh.H * sh.H), y(size_t(M) * sh.OC), xr(size_t(M) * K);
    for (auto& v : x) v = std::max(0.0f, nd(rng));
    for (auto& v : xr) v = std::max(0.0f, nd(rng));
    std::vector<uint8_t> w(size_t(sh.OC) * (4 + K));
    for (int n = 0; n < sh.OC; ++n) {
      const float s = 0.01f;
      std::memcpy(&w[n * (4 + K)], &s, 4);
      for (int64_t k = 0; k < K; ++k) w[n * (4 + K) + 4 + k] = uint8_t(int8_t(std::max(-127, std::min(127, int(nd(rng) * 30)))));
    }
    const PackedOperand pc = conv2d_int8_pack(g, w.data(), isa);
    const PackedOperand pq = qmatmul_pack_int8(w.data(), sh.OC, K, isa);
    const QMatmulPlan plan = qmatmul_plan(QFormat::int8, M, sh.OC, K, isa, 0.02f);
    GemmEpilogue ep;
    std::vector<double> t[2];
    for (int r = 0; r < 11; ++r)
      for (int v = 0; v < 2; ++v) {
        double tt = 0;
        for (int i = 0; i < 5; ++i) {
          if (cold) for (size_t j = 0; j < flush.size(); j += 16) flush[j] += 1.0f;
          const auto t0 = now();
          if (v == 0) conv2d_int8(g, isa, x.data(), pc, 0.02f, ep, nullptr, y.data());
          else if (!getenv("NOGEMM")) qmatmul(plan, xr.data(), w.data(), nullptr, y.data(), &pq);
          tt += std::chrono::duration<double>(now() - t0).count();
        }
        t[v].push_back(tt / 5);
      }
    const double a = med(t[0]), b = med(t[1]), op = 2.0 * M * sh.OC * K;
    printf("C%4d H%3d OC%5d k%d s%d  M %6ld K %5ld: conv %.3f ms (%4.0f Gop/s)  gemm %.3f ms (%4.0f)  conv-gemm %.3f ms\n",
           sh.C, sh.H, sh.OC, sh.k, sh.s, M, K, a * 1e3, op / a / 1e9, b * 1e3, op / b / 1e9, (a - b) * 1e3);
  }
}
