// Decode GEMV streaming rate: qmatmul with one row of x over W distinct int8 (or int4_g128) weights called in turn
// (from memory where W x the weight's bytes exceed the L3: at the default 8, int8's 5632 x 2048 and 2048 x 5632, 92 MB,
// and int4's, 47 MB, on a 32 MiB L3; 2048 x 2048 partly from L3), 2 threads, median GB/s of weight bytes.
// (g++ -O2 -std=c++17 -I csrc gemv_stream.cc build/cpp/libzenith_core.a -fopenmp -o gemv_stream)
// ./gemv_stream iters [W] [int8|int4]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  const int iters = atoi(argv[1]);
  const int nw = argc > 2 ? atoi(argv[2]) : 8;
  const bool int4 = argc > 3 && std::string(argv[3]) == "int4";
  const QFormat f = int4 ? QFormat::int4_g128 : QFormat::int8;
  set_num_threads(2);
  struct Shape { int64_t N, K; };
  for (const Shape s : {Shape{5632, 2048}, Shape{2048, 5632}, Shape{2048, 2048}}) {
    const QIsa isa = qisa_default();
    const QMatmulPlan p = qmatmul_plan(f, 1, s.N, s.K, isa);
    std::vector<std::vector<uint8_t>> ws(nw, std::vector<uint8_t>(size_t(s.N * p.row_bytes)));
    std::mt19937 rng(1);
    for (auto& w : ws)
      for (int64_t n = 0; n < s.N; ++n) {
        uint8_t* r = w.data() + n * p.row_bytes;
        for (int64_t i = 0; i < p.row_bytes; ++i) r[i] = uint8_t(rng());
        if (!int4) { const float sc = 0.01f; std::memcpy(r, &sc, 4); }
        else for (int64_t b = 0; b < s.K / 128; ++b) { r[b * 66] = 0x00; r[b * 66 + 1] = 0x20; }  // f16 d = 2^-7
      }
    std::vector<float> x(s.K, 0.5f), y(s.N);
    std::vector<double> ts;
    for (int i = 0; i < iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      qmatmul(p, x.data(), ws[i % nw].data(), nullptr, y.data(), nullptr, Activation::kNone);
      ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ts.begin(), ts.end());
    const double t = ts[ts.size() / 2];
    std::printf("%s %s N%ld K%ld x%d: %.1f us, %.1f GB/s\n", qisa_name(isa), int4 ? "int4_g128" : "int8", long(s.N),
                long(s.K), nw, t * 1e6, double(s.N * p.row_bytes) / t / 1e9);
  }
}
