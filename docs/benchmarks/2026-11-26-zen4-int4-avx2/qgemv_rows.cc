// qmatmul's kernel alone on random weights of a format: M rows of x (1 = decode), 2
// threads, median of REPS calls, hot (one copy of the weights) and cold (cycling through
// copies that together exceed L3). Build against the core and run, from the repo root:
//   cmake -S . -B build/cpp -DZENITH_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release && cmake --build build/cpp -j 2
//   g++ -O2 -march=x86-64-v3 -std=c++17 -fopenmp -Icsrc qgemv_rows.cc build/cpp/libzenith_core.a -o qgemv_rows
//   ./qgemv_rows FORMAT N K THREADS REPS [M [ISA]]   (ISA: avx2 or avx512vnni; default: qisa_for's)
// qgemv_rows.log: the binary built at 7a26c4f (AVX2, one weight row at a time) and at
// 6cf451e (8 weight rows at a time), and 6cf451e's VNNI kernels, for TinyLlama's shapes
// (then without the ISA argument: ZENITH_NO_AVX512=1 chose AVX2).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#include <algorithm>
#include <random>
#include <string>
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  QFormat f;
  if (argc < 6 || !parse_qformat(argv[1], &f)) {
    std::fprintf(stderr, "usage: qgemv_rows FORMAT N K THREADS REPS [M [ISA]] (FORMAT as quant_formats.def names it)\n");
    return 2;
  }
  int64_t N = atoll(argv[2]), K = atoll(argv[3]);
  int threads = atoi(argv[4]), reps = atoi(argv[5]);
  int M = argc > 6 ? atoi(argv[6]) : 1;
  const std::string isa_arg = argc > 7 ? argv[7] : "";
  set_num_threads(threads);
  int64_t rb = qformat_row_bytes(f, K);
  if (rb < 0) {
    std::fprintf(stderr, "K = %lld is not a whole number of %s blocks\n", (long long)K, argv[1]);
    return 2;
  }
  std::mt19937 rng(1);
  std::vector<uint8_t> w(size_t(N * rb));
  for (auto& b : w) b = uint8_t(rng());
  const auto& info = qformat_info(f);
  uint16_t h = 0x2000;  // small f16
  float one = 0.01f;
  if (info.block_elems == 0) for (int64_t n = 0; n < N; ++n) memcpy(&w[n*rb], &one, 4);
  else for (int64_t n = 0; n < N; ++n) for (int64_t b = 0; b < K / info.block_elems; ++b) memcpy(&w[n*rb + b*info.block_bytes], &h, 2);
  int copies = int(std::max<int64_t>(1, (int64_t(96) << 20) / int64_t(w.size())));
  std::vector<std::vector<uint8_t>> cw(size_t(copies), w);
  std::normal_distribution<float> nd;
  std::vector<float> x(size_t(M*K)), y(size_t(M*N));
  for (auto& v : x) v = nd(rng);
  auto plan = isa_arg == "avx2"         ? qmatmul_plan(f, M, N, K, QIsa::kAvx2)
              : isa_arg == "avx512vnni" ? qmatmul_plan(f, M, N, K, QIsa::kAvx512)
                                        : qmatmul_plan(f, M, N, K);
  for (int hot = 1; hot >= 0; --hot) {
    std::vector<double> ts;
    for (int r = 0; r < reps + 3; ++r) {
      const uint8_t* wp = hot ? w.data() : cw[size_t(r % copies)].data();
      auto t0 = std::chrono::steady_clock::now();
      qmatmul(plan, x.data(), wp, nullptr, y.data());
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 3) ts.push_back(t);
    }
    std::sort(ts.begin(), ts.end());
    double med = ts[ts.size()/2];
    printf("%s N=%ld K=%ld M=%d threads=%d %s: %.1f us, %.2f ns/block/thread, %.1f GB/s\n", argv[1], N, K, M, threads, hot?"hot ":"cold", med*1e6,
           med*1e9*threads/(double(N)*K/32*M), double(w.size())/med/1e9);
  }
}
