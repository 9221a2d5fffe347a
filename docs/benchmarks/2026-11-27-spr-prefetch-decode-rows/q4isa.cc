// 4-bit qmatmul with few rows of x, AVX-512 VNNI's one-row dot kernels against the
// AVX-VNNI / AVX2 8-row kernels, weights cold (copies through 512 MiB of 2 MiB pages),
// interleaved in one process. GB/s of weight bytes.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
#include "zenith/weight_memory.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? atoi(argv[1]) : 2);
  struct S { QFormat f; const char* name; int64_t N, K; };
  S shapes[] = {{QFormat::q4_0, "q4_0", 5632, 2048}, {QFormat::q4_0, "q4_0", 2048, 5632}, {QFormat::q4_0, "q4_0", 2048, 2048},
                {QFormat::q4_0, "q4_0", 256, 2048}, {QFormat::int4_g64, "i4g64", 5632, 2048}, {QFormat::int4_g128, "i4g128", 2048, 5632}};
  QIsa isas[] = {QIsa::kAvx512, QIsa::kAvxVnni, QIsa::kAvx2};
  std::mt19937 rng(1);
  for (const S& s : shapes) {
    const int64_t row_bytes = qformat_row_bytes(s.f, s.K);
    const size_t bytes = size_t(s.N * row_bytes);
    const int copies = int(std::max<size_t>(2, (size_t(512) << 20) / bytes));
    auto mem = alloc_weight_memory(bytes * copies);
    uint8_t* w = static_cast<uint8_t*>(mem.get());
    for (size_t i = 0; i < bytes * copies; ++i) w[i] = uint8_t(rng());
    const int64_t bb = qformat_info(s.f).block_bytes;
    for (size_t i = 0; i + bb <= bytes * copies; i += bb) { w[i] = 0; w[i + 1] = 0x20; }
    for (int64_t M : {1, 2, 4, 7}) {
      std::vector<float> x(M * s.K), y(M * s.N);
      for (auto& v : x) v = float(int(rng() % 200) - 100) / 50.0f;
      double best[3][2] = {};
      for (int round = 0; round < 3; ++round)
        for (int ii = 0; ii < 3; ++ii) {
          if (!qisa_supported(isas[ii])) continue;
          const QMatmulPlan p = qmatmul_plan(s.f, M, s.N, s.K, isas[ii]);
          for (int cold = 0; cold < 2; ++cold) {
            const int reps = 100;
            for (int i = 0; i < 5; ++i) qmatmul(p, x.data(), w, nullptr, y.data());
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < reps; ++i) qmatmul(p, x.data(), w + (cold ? bytes * (i % copies) : 0), nullptr, y.data());
            const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
            const double gbs = bytes / t / 1e9;
            if (gbs > best[ii][cold]) best[ii][cold] = gbs;
          }
        }
      printf("%-6s %5ld x %5ld M=%ld  GB/s cold: avx512 %5.1f avxvnni %5.1f avx2 %5.1f | hot: %5.1f %5.1f %5.1f\n", s.name,
             s.N, s.K, M, best[0][1], best[1][1], best[2][1], best[0][0], best[1][0], best[2][0]);
    }
  }
}
