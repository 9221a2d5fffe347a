// one thread: AVX2's u8 int8 GEMM tile, 2 rows (library) against 4 rows (library), over M rows of one 32-column
// block, 7-bit activation codes, 8-bit (or w7: 7-bit) weight codes; MAC/ns and paired time ratios.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include "zenith/kernels/quant_formats.h"
using namespace zenith; using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoi(argv[1]) : 768, M = argc > 2 ? atoi(argv[2]) : 128;
  const bool w7 = argc > 3 && atoi(argv[3]);
  const int reps = std::max<int64_t>(1, 400 * 384 * 64 / (K * M));
  std::vector<uint8_t> w(K * 32); for (auto& v : w) v = uint8_t((w7 ? rand() % 127 - 63 : rand() % 255 - 127) ^ 0x80);
  std::vector<float> ws(32); for (auto& v : ws) v = 1.0f;
  std::vector<float> d(M * K / 32); for (auto& v : d) v = 1.0f;
  std::vector<float> y1(M * 32), y2(M * 32);
  std::vector<int8_t> q(M * K); for (auto& v : q) v = rand() % 127 - 63;
  std::vector<int16_t> s16(M * K / 16);
  std::vector<QActRow> a(M);
  for (int m = 0; m < M; ++m) {
    a[m] = QActRow{q.data() + m * K, d.data() + m * K / 32, s16.data() + m * K / 16, nullptr};
    float z = 0; for (int64_t k = 0; k < K; ++k) z += q[m * K + k];
    a[m].zshare = z;
  }
  const QGemmTileFn* t2 = w7 ? q8_gemm_tiles_u8_w7_avx2() : q8_gemm_tiles_u8_avx2();
  const QGemmTileFn* t4 = w7 ? q8_gemm_tiles_u8x4_w7_avx2() : q8_gemm_tiles_u8x4_avx2();
  auto run2 = [&] { for (int64_t m = 0; m < M; m += 2) t2[1](w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32); };
  auto run4 = [&] { for (int64_t m = 0; m < M; m += 4) t4[3](w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32); };
  run2(); run4();
  std::printf("%s\n", y1 == y2 ? "bit-identical" : "DIFFER");
  std::vector<double> r; double to = 0, tn = 0;
  for (int round = 0; round < 41; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) run2();
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) run4();
    auto t2_ = std::chrono::steady_clock::now();
    double a_ = std::chrono::duration<double, std::nano>(t1 - t0).count(), b_ = std::chrono::duration<double, std::nano>(t2_ - t1).count();
    r.push_back(b_ / a_); to += a_; tn += b_;
  }
  std::sort(r.begin(), r.end());
  const double macs = 41.0 * reps * M * 32 * K;
  std::printf("K %ld M %ld %s: 2-row %.1f MAC/ns, 4-row %.1f; 4-row/2-row time median %.3f [%.3f, %.3f] (10th-90th)\n", long(K), long(M), w7 ? "w7" : "8-bit", macs / to, macs / tn, r[20], r[4], r[36]);
}
