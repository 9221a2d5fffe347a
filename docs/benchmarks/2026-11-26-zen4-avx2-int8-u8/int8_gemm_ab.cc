// In-process A/B of the AVX2 int8 GEMM (qmatmul, weight packed) with the narrow tiles
// (the plan's act_max 63) against the sign-trick tiles (the same plan with act_max 127)
// and fp32 sgemm with B packed, 15 interleaved rounds of 10 calls, medians.
// g++ -O2 -std=c++17 -march=x86-64-v3 -Icsrc int8_gemm_ab.cc build/cpp/libzenith_core.a -fopenmp -o ab
// ZENITH_NO_AVX512=1 ./ab M N K [threads]   (ONLY=0|1|2 runs one variant, for perf)
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include <cstring>
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  int64_t M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  int threads = argc > 4 ? atoi(argv[4]) : 2;
  set_num_threads(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> x(M * K), y(M * N), wf(N * K), yf(M * N);
  for (auto& v : x) v = nd(rng);
  for (auto& v : wf) v = nd(rng) * 0.05f;
  std::vector<uint8_t> w(N * (4 + K));
  for (int64_t n = 0; n < N; ++n) {
    float s = 0.05f * 4 / 127; std::memcpy(&w[n * (4 + K)], &s, 4);
    for (int64_t k = 0; k < K; ++k) w[n * (4 + K) + 4 + k] = uint8_t(int8_t(std::max(-127, std::min(127, int(nd(rng) * 30)))));
  }
  PackedOperand pk = qmatmul_pack_int8(w.data(), N, K, QIsa::kAvx2);
  QMatmulPlan narrow = qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvx2);
  QMatmulPlan sign = narrow; sign.act_max = 127;
  PackedOperand pb = sgemm_pack_b(K, N, wf.data(), 1, K);
  std::vector<double> tn, ts, tf;
  auto now = [] { return std::chrono::steady_clock::now(); };
  for (int round = 0; round < 15; ++round) {
    for (int v = 0; v < 3; ++v) { if (getenv("ONLY") && v != atoi(getenv("ONLY"))) continue;
      auto t0 = now();
      for (int i = 0; i < 10; ++i) {
        if (v == 0) qmatmul(narrow, x.data(), w.data(), nullptr, y.data(), &pk);
        if (v == 1) qmatmul(sign, x.data(), w.data(), nullptr, y.data(), &pk);
        if (v == 2) sgemm(M, N, K, 1.0f, x.data(), K, 1, wf.data(), 1, K, yf.data(), N, false, &pb);
      }
      double dt = std::chrono::duration<double>(now() - t0).count() / 10;
      (v == 0 ? tn : v == 1 ? ts : tf).push_back(dt);
    }
  }
  auto med = [](std::vector<double> v) { if (v.empty()) return 1.0; std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  double fl = 2.0 * M * N * K;
  printf("%ldx%ldx%ld narrow %.3f ms (%.0f Gop/s)  sign %.3f ms (%.0f)  fp32 %.3f ms (%.0f)  narrow/sign %.3f narrow/fp32 %.3f\n",
         M, N, K, med(tn) * 1e3, fl / med(tn) / 1e9, med(ts) * 1e3, fl / med(ts) / 1e9, med(tf) * 1e3, fl / med(tf) / 1e9,
         med(tn) / med(ts), med(tn) / med(tf)); return 0;
}
