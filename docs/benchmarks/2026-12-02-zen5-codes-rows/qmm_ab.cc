// (g++ -O2 -std=c++17 -I csrc qmm_ab.cc build/cpp/libzenith_core.a -fopenmp -o qmm_ab; needs qt_switch.diff applied)
// qmatmul as the ops run it (int8 weight packed, dynamic activations, a scale per row on AVX-512 VNNI), a change
// off (the environment variable set: a temporary switch) and on, interleaved call by call. ./qmm_ab M N K iters gelu var
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
  const int64_t M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  const int iters = atoi(argv[4]);
  const Activation act = atoi(argv[5]) ? Activation::kGelu : Activation::kNone;
  const char* var = argv[6];
  set_num_threads(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> x(M * K), y(M * N), bias(N, 0.1f);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> w(N * (4 + K));
  for (int64_t n = 0; n < N; ++n) {
    const float s = 0.05f * 4 / 127;
    std::memcpy(&w[n * (4 + K)], &s, 4);
    for (int64_t k = 0; k < K; ++k)
      w[n * (4 + K) + 4 + k] = uint8_t(int8_t(std::max(-127, std::min(127, int(nd(rng) * 30)))));
  }
  const QIsa isa = qisa_default();
  const PackedOperand pk = qmatmul_pack_int8(w.data(), N, K, isa);
  const QMatmulPlan p = qmatmul_plan(QFormat::int8, M, N, K, isa, 0.0f, false, isa == QIsa::kAvx512);
  std::vector<double> ts[2];
  for (int i = 0; i < 2 * iters; ++i) {
    const int v = i % 2;
    if (v == 0) setenv(var, "1", 1);
    else unsetenv(var);
    const auto t0 = std::chrono::steady_clock::now();
    qmatmul(p, x.data(), w.data(), bias.data(), y.data(), &pk, act);
    ts[v].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double ms[2];
  for (int v = 0; v < 2; ++v) std::sort(ts[v].begin(), ts[v].end()), ms[v] = ts[v][ts[v].size() / 2];
  std::printf("%s M%ld N%ld K%ld gelu%d: %s set %.4f ms, unset %.4f ms (%.2fx)\n", qisa_name(isa), long(M), long(N),
              long(K), int(act == Activation::kGelu), var, ms[0], ms[1], ms[1] / ms[0]);
}
