// sgemm alone at ResNet-50's and MobileNet V2's 1x1-conv shapes (M = output channels, N =
// pixels, K = input channels, one GEMM per image): with the epilogue (bn scale/shift + ReLU),
// with B packed in advance, and without the epilogue. Minimum of 15 runs.
// Build, from the repository root, after the C++ build (cmake ... -DZENITH_BUILD_TESTS=ON):
//   g++ -O2 -march=x86-64-v3 -std=c++17 -fopenmp -Icsrc docs/benchmarks/2026-11-26-zen4-mobilenet-project/gemm_conv_shapes.cc build/cpp/libzenith_core.a -o gb
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
#include "zenith/kernels/kernels.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  struct S { int64_t M, N, K; int imgs; };
  std::vector<S> shapes = {{16, 12544, 32, 8}, {24, 3136, 144, 8}, {24, 3136, 96, 8}, {32, 784, 192, 8}, {256, 3136, 64, 8}, {64, 3136, 256, 8}, {128, 3136, 256, 8}, {512, 784, 128, 8}, {128, 784, 512, 8},
                           {1024, 196, 256, 8}, {256, 196, 1024, 8}, {2048, 49, 512, 8}, {512, 49, 2048, 8},
                           {1024, 1568, 256, 1}, {256, 1568, 1024, 1}, {768, 3072, 768, 1}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto s : shapes) {
    std::vector<float> A(s.M * s.K), B(s.K * s.N * s.imgs), C(s.M * s.N * s.imgs), sc(s.M, 1.1f), sh(s.M, 0.1f);
    for (auto& v : A) v = d(rng);
    for (auto& v : B) v = d(rng);
    PackedOperand pa = sgemm_pack_a(s.M, s.K, A.data(), s.K, 1);
    GemmEpilogue ep; ep.row_scale = sc.data(); ep.row_shift = sh.data(); ep.act = Activation::kRelu;
    double best = 1e9;
    for (int it = 0; it < 15; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      for (int n = 0; n < s.imgs; ++n)
        sgemm(s.M, s.N, s.K, 1.0f, A.data(), s.K, 1, B.data() + n * s.K * s.N, s.N, 1, C.data() + n * s.M * s.N, s.N, false, &pa, &ep);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, t);
    }
    std::vector<PackedOperand> pbs;
    for (int n = 0; n < s.imgs; ++n) pbs.push_back(sgemm_pack_b(s.K, s.N, B.data() + n * s.K * s.N, s.N, 1));
    double best2 = 1e9, best3 = 1e9;
    for (int it = 0; it < 15; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      for (int n = 0; n < s.imgs; ++n)
        sgemm(s.M, s.N, s.K, 1.0f, A.data(), s.K, 1, B.data() + n * s.K * s.N, s.N, 1, C.data() + n * s.M * s.N, s.N, false, &pbs[n], &ep);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best2 = std::min(best2, t);
      t0 = std::chrono::steady_clock::now();
      for (int n = 0; n < s.imgs; ++n)
        sgemm(s.M, s.N, s.K, 1.0f, A.data(), s.K, 1, B.data() + n * s.K * s.N, s.N, 1, C.data() + n * s.M * s.N, s.N, false, &pa, nullptr);
      t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best3 = std::min(best3, t);
    }
    double fl = 2.0 * s.M * s.N * s.K * s.imgs;
    printf("%5ld x %5ld x %5ld x%d  %8.3f ms  %6.1f GFLOP/s  | B prepacked %6.1f | no epilogue %6.1f\n", s.M, s.N, s.K, s.imgs, best * 1e3, fl / best / 1e9, fl / best2 / 1e9, fl / best3 / 1e9);
  }
}
