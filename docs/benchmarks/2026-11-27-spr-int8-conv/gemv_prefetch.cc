// One-row qmatmul (decode) per format at Gemma 3 270M's and TinyLlama's shapes, weights
// hot (one copy) and cold (copies cycled through 256 MiB); GB/s of weight bytes.
// g++ -O2 -std=c++17 -march=x86-64-v3 -Icsrc gemv_prefetch.cc build/cpp/libzenith_core.a -fopenmp -o gemv
// ./gemv [threads]. gemv_prefetch_runs.txt (column 1: bytes ahead, 0 = no prefetch) was
// made with a temporary switch, PFA=<bytes>, read by over_rows in place of
// kRowPrefetchAhead; 4 rounds of 0 / 1024 / 2048 / 4096 interleaved.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? atoi(argv[1]) : 2);
  struct S { QFormat f; const char* name; int64_t N, K; };
  S shapes[] = {{QFormat::q5_0, "q5_0", 2048, 640}, {QFormat::q5_0, "q5_0", 1024, 640}, {QFormat::q6_k, "q6_k", 640, 2048},
                {QFormat::q4_k, "q4_k", 640, 1024}, {QFormat::q8_0, "q8_0", 256, 640}, {QFormat::q4_0, "q4_0", 2048, 640},
                {QFormat::q8_0, "q8_0", 32768, 640}, {QFormat::int4_g128, "i4g128", 5632, 2048},
                {QFormat::int4_g128, "i4g128", 2048, 5632}, {QFormat::int8, "int8", 5632, 2048}, {QFormat::int4_g128, "i4g128", 256, 2048}};
  std::mt19937 rng(1);
  for (const S& s : shapes) {
    const QMatmulPlan p = qmatmul_plan(s.f, 1, s.N, s.K, qisa_for(s.f));
    const size_t bytes = size_t(s.N * p.row_bytes);
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / bytes));
    std::vector<uint8_t> w(bytes * copies);
    for (auto& b : w) b = uint8_t(rng());
    // f16 scales: set every block's leading f16 to a small normal value (0x2000 ~ 2^-7)
    const int64_t bb = qformat_info(s.f).block_bytes, be = qformat_info(s.f).block_elems;
    if (s.f == QFormat::int8) { for (int64_t n = 0; n < s.N * copies; ++n) { const float sc = 0.01f; std::memcpy(&w[n * p.row_bytes], &sc, 4); } }
    else if (s.f == QFormat::q5_0 || s.f == QFormat::q8_0 || s.f == QFormat::q4_0 || s.f == QFormat::int4_g128)
      for (size_t i = 0; i + bb <= w.size(); i += bb) { w[i] = 0; w[i + 1] = 0x20; }
    else  // k-quants: d (and dmin) f16 at the block's end or start: make all f16-looking pairs sane by
      for (size_t i = 0; i + bb <= w.size(); i += bb) for (int j = 0; j < 4; ++j) { w[i + bb - 2 - 2 * (j % 2)] &= 0x3f; w[i + 1 + 2 * (j % 2)] &= 0x3f; }
    std::vector<float> x(s.K), y(s.N);
    for (auto& v : x) v = float(int(rng() % 200) - 100) / 50.0f;
    for (int cold = 0; cold < 2; ++cold) {
      const int reps = 400;
      for (int i = 0; i < 20; ++i) qmatmul(p, x.data(), w.data(), nullptr, y.data());
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) qmatmul(p, x.data(), w.data() + (cold ? bytes * (i % copies) : 0), nullptr, y.data());
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
      printf("%-5s %5ld x %5ld %-4s isa %-10s %7.1f us  %6.1f GB/s  %.2f ns per 32 values per thread\n", s.name, s.N, s.K,
             cold ? "cold" : "hot", qisa_name(p.isa), t * 1e6, bytes / t / 1e9, t * 1e9 * num_threads() / (s.N * s.K / 32.0));
    }
    (void)be;
  }
}
