// one thread, in L1: AVX2's u8 int8 GEMM tile (2 rows) against its w7 variant on the same 7-bit weight codes; MAC/ns
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cmath>
#include "zenith/kernels/quant_formats.h"
using namespace zenith; using namespace zenith::quant;
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoi(argv[1]) : 384, M = argc > 2 ? atoi(argv[2]) : 64;
  const int reps = 400;
  std::vector<uint8_t> w(K * 32); for (auto& v : w) v = uint8_t((rand() % 127 - 63) ^ 0x80);
  std::vector<float> ws(32); for (auto& v : ws) v = 0.001f * (rand() % 100 + 1);
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
  const QGemmTileFn* t = q8_gemm_tiles_u8_avx2();
  const QGemmTileFn* t7 = q8_gemm_tiles_u8_w7_avx2();
  for (int64_t m = 0; m < M; m += 2) { t[1](w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32); t7[1](w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32); }
  std::printf("%s\n", std::memcmp(y1.data(), y2.data(), y1.size() * 4) == 0 ? "bit-identical (unit scales: exact integers)" : "DIFFER");
  std::vector<double> r; double to = 0, tn = 0;
  for (int round = 0; round < 41; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 2) t[1](w.data(), ws.data(), K, a.data() + m, y1.data() + m * 32, 32, 32);
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) for (int64_t m = 0; m < M; m += 2) t7[1](w.data(), ws.data(), K, a.data() + m, y2.data() + m * 32, 32, 32);
    auto t2 = std::chrono::steady_clock::now();
    double a_ = std::chrono::duration<double, std::nano>(t1 - t0).count(), b_ = std::chrono::duration<double, std::nano>(t2 - t1).count();
    r.push_back(b_ / a_); to += a_; tn += b_;
  }
  std::sort(r.begin(), r.end());
  const double macs = 41.0 * reps * M * 32 * K;
  std::printf("K %ld: u8 %.1f MAC/ns, u8_w7 %.1f; w7/u8 time median %.3f [%.3f, %.3f] (10th-90th)\n", long(K), macs / to, macs / tn, r[20], r[4], r[36]);
}
