// (g++ -O2 -std=c++17 -I csrc qmm_rates.cc build/cpp/libzenith_core.a -fopenmp -o qmm_rates)
// qmatmul at all-MiniLM-L6-v2's seq-128 shapes as the ops run them (int8 weight packed, dynamic activations, a
// scale per row on AVX-512 VNNI), 2 threads: median ms and GMAC/s per shape. ./qmm_rates iters [M] [W]
// W > 1: W distinct packed weights called in turn (out of L2, or of L3 if W x the weight's bytes exceed it; each
// line then starts "wW").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include "zenith/kernels/kernels.h"
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  const int iters = atoi(argv[1]);
  const int64_t M = argc > 2 ? atoi(argv[2]) : 128;
  set_num_threads(2);
  struct Shape { int64_t N, K; bool gelu; const char* name; };
  const Shape shapes[] = {{1152, 384, false, "qkv"}, {384, 384, false, "o"}, {1536, 384, true, "ffn-up+gelu"},
                          {384, 1536, false, "ffn-down"}, {1536, 384, false, "ffn-up"}};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (const Shape& s : shapes) {
    const int64_t N = s.N, K = s.K;
    std::vector<float> x(M * K), y(M * N), bias(N, 0.1f);
    for (auto& v : x) v = nd(rng);
    std::vector<uint8_t> w(N * (4 + K));
    for (int64_t n = 0; n < N; ++n) {
      const float sc = 0.05f * 4 / 127;
      std::memcpy(&w[n * (4 + K)], &sc, 4);
      for (int64_t k = 0; k < K; ++k)
        w[n * (4 + K) + 4 + k] = uint8_t(int8_t(std::max(-127, std::min(127, int(nd(rng) * 30)))));
    }
    const QIsa isa = qisa_default();
    const int nw = std::max(1, argc > 3 ? atoi(argv[3]) : 1);
    std::vector<PackedOperand> pks;
    for (int i = 0; i < nw; ++i) pks.push_back(qmatmul_pack_int8(w.data(), N, K, isa));
    const QMatmulPlan p = qmatmul_plan(QFormat::int8, M, N, K, isa, 0.0f, false, isa == QIsa::kAvx512);
    std::vector<double> ts;
    for (int i = 0; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      qmatmul(p, x.data(), w.data(), bias.data(), y.data(), &pks[size_t(i % nw)], s.gelu ? Activation::kGelu : Activation::kNone);
      ts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ts.begin(), ts.end());
    const double ms = ts[ts.size() / 2];
    if (nw > 1) std::printf("w%d ", nw);
    std::printf("%s %-12s M%ld N%ld K%ld: %.4f ms, %.0f GMAC/s\n", qisa_name(isa), s.name, long(M), long(N), long(K),
                ms, double(M) * N * K / ms / 1e6);
  }
}
