// The same with the weights cold: copies of the weight over 512 MB, rotated (AVX-512 VNNI, int4_g128).
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include <cstring>
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(2);
  QFormat f = QFormat::int4_g128;
  std::mt19937 rng(1);
  struct S { int64_t N, K; } shapes[] = {{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}};
  for (int64_t M : {1, 16, 32})
  for (auto s : shapes) {
    const int64_t rb = qformat_row_bytes(f, s.K);
    const int copies = int(512e6 / double(s.N * rb)) + 1;
    std::vector<uint8_t> w(size_t(s.N * rb) * copies);
    for (auto& b : w) b = uint8_t(rng());
    for (int64_t n = 0; n < s.N * copies; ++n) for (int64_t b = 0; b < s.K / 128; ++b) { uint16_t h = 0x2000; std::memcpy(&w[n * rb + b * 66], &h, 2); }
    int which = 0;
    std::vector<float> x(size_t(M * s.K)), y(size_t(M * s.N));
    std::normal_distribution<float> nd; for (auto& v : x) v = nd(rng);
    double best[2] = {1e9, 1e9};
    for (int rep = 0; rep < 40; ++rep)
      for (int mode = 0; mode < 2; ++mode) {
        QMatmulPlan p = qmatmul_plan(f, M, s.N, s.K, QIsa::kAvx512);
        if (mode == 0 && p.lanes) { p.lanes = false; p.zero_sums = quant::zero_sums_avx512; p.zero = 8; }
        if (mode == 1 && !p.lanes) continue;
        auto t0 = std::chrono::steady_clock::now();
        qmatmul(p, x.data(), w.data() + size_t(s.N * rb) * (which++ % copies), nullptr, y.data());
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best[mode] = std::min(best[mode], t);
      }
    double gop = 2.0 * M * s.N * s.K / 1e9;
    printf("M=%3ld N=%5ld K=%5ld dots %8.1f us (%5.0f GOP/s)  lanes %8.1f us (%5.0f GOP/s)\n", (long)M, (long)s.N, (long)s.K,
           best[0] * 1e6, gop / best[0], best[1] * 1e6, gop / best[1]);
  }
}
