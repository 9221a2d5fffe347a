// quantize_act_row_avx2 with x and the code/scale/sum buffers at chosen offsets (mod 4096)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoll(argv[1]) : 1536, M = 128;
  const int64_t off = argc > 2 ? atoll(argv[2]) : 0;
  char* xb = static_cast<char*>(std::aligned_alloc(4096, size_t(M * K * 4 + 8192)));
  char* sb = static_cast<char*>(std::aligned_alloc(4096, size_t(M * K * 2 + 8192)));
  float* x = reinterpret_cast<float*>(xb);
  int8_t* q = reinterpret_cast<int8_t*>(sb + off);
  float* d = reinterpret_cast<float*>(sb + off + M * K);
  int16_t* s = reinterpret_cast<int16_t*>(sb + off + M * K + M * K / 32 * 4);
  std::mt19937 g(1); std::normal_distribution<float> nd;
  for (int64_t i = 0; i < M * K; ++i) x[i] = nd(g);
  double best = 1e30;
  for (int rep = 0; rep < 50; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t m = 0; m < M; ++m)
      quantize_act_row_avx2(x + m * K, K, 32, q + m * K, d + m * K / 32, s + m * K / 16, 0.0f, 127);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("K %ld off %ld: %.3f ns a value\n", (long)K, (long)off, best * 1e9 / double(M * K));
}
