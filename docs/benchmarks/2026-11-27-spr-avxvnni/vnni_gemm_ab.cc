// In-process A/B of the int8 GEMM (qmatmul, weight packed) on AVX-VNNI against AVX2
// (its narrow tiles, 7-bit activation codes) and fp32 sgemm with B packed (AVX2 kernels
// when run with ZENITH_NO_AVX512=1), dynamic activations; then the same for static rows
// (x_scale 0.02: the uniform tiles). 15 interleaved rounds of 10 calls, medians.
// g++ -O2 -std=c++17 -march=x86-64-v3 -Icsrc vnni_gemm_ab.cc build/cpp/libzenith_core.a -fopenmp -o ab
// ZENITH_NO_AVX512=1 ./ab M N K [threads]
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

int main(int argc, char** argv) {
  const int64_t M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  set_num_threads(argc > 4 ? atoi(argv[4]) : 2);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> x(M * K), y(M * N), wf(N * K), yf(M * N);
  for (auto& v : x) v = nd(rng);
  for (auto& v : wf) v = nd(rng) * 0.05f;
  std::vector<uint8_t> w(N * (4 + K));
  for (int64_t n = 0; n < N; ++n) {
    const float s = 0.05f * 4 / 127;
    std::memcpy(&w[n * (4 + K)], &s, 4);
    for (int64_t k = 0; k < K; ++k)
      w[n * (4 + K) + 4 + k] = uint8_t(int8_t(std::max(-127, std::min(127, int(nd(rng) * 30)))));
  }
  const PackedOperand pv = qmatmul_pack_int8(w.data(), N, K, QIsa::kAvxVnni);
  const PackedOperand pa = qmatmul_pack_int8(w.data(), N, K, QIsa::kAvx2);
  const PackedOperand pb = sgemm_pack_b(K, N, wf.data(), 1, K);
  const QMatmulPlan plans[2][2] = {
      {qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvxVnni), qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvx2)},
      {qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvxVnni, 0.02f),
       qmatmul_plan(QFormat::int8, M, N, K, QIsa::kAvx2, 0.02f)}};
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double fl = 2.0 * M * N * K;
  for (int stat = 0; stat < 2; ++stat) {
    std::vector<double> t[3];
    for (int round = 0; round < 15; ++round)
      for (int v = 0; v < 3; ++v) {
        const auto t0 = now();
        for (int i = 0; i < 10; ++i) {
          if (v < 2) qmatmul(plans[stat][v], x.data(), w.data(), nullptr, y.data(), v == 0 ? &pv : &pa);
          else sgemm(M, N, K, 1.0f, x.data(), K, 1, wf.data(), 1, K, yf.data(), N, false, &pb);
        }
        t[v].push_back(std::chrono::duration<double>(now() - t0).count() / 10);
      }
    const double a = med(t[0]), b = med(t[1]), f = med(t[2]);
    printf("%s %ldx%ldx%ld  avxvnni %.3f ms (%.0f Gop/s)  avx2 %.3f ms (%.0f)  fp32 %.3f ms (%.0f)  "
           "vnni/avx2 %.3f  vnni/fp32 %.3f  avx2/fp32 %.3f\n",
           stat ? "static " : "dynamic", M, N, K, a * 1e3, fl / a / 1e9, b * 1e3, fl / b / 1e9, f * 1e3,
           fl / f / 1e9, a / b, a / f, b / f);
  }
  return 0;
}
