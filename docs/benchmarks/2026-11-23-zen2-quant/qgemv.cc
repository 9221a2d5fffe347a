// qmatmul's kernel alone on one weight's raw bytes: median of many calls, hot (one copy)
// and cold (cycling through copies that together exceed L3). Build against the core:
//   cmake -S . -B build/cpp -DZENITH_BUILD_TESTS=ON && cmake --build build/cpp -j 2
//   g++ -O2 -march=x86-64-v3 -std=c++17 -fopenmp -Icsrc qgemv.cc build/cpp/libzenith_core.a -o qgemv
//   ./qgemv WEIGHT.bin FORMAT ROWS ROW_BYTES THREADS ROWS_OF_X REPS
// (WEIGHT.bin: a tensor's bytes, e.g. np.ascontiguousarray(gguf_tensor.data).tofile(...)).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>
#include <algorithm>
#include <random>
#include "zenith/kernels/quant.h"
#include "zenith/threadpool.h"
using namespace zenith;
int main(int argc, char** argv) {
  const char* file = argv[1];
  QFormat f; parse_qformat(argv[2], &f);
  int64_t N = atoll(argv[3]), rb = atoll(argv[4]);
  int threads = atoi(argv[5]), M = atoi(argv[6]), reps = atoi(argv[7]);
  set_num_threads(threads);
  std::vector<uint8_t> w(size_t(N * rb));
  std::ifstream(file, std::ios::binary).read(reinterpret_cast<char*>(w.data()), std::streamsize(w.size()));
  int64_t K = qformat_row_elems(f, rb);
  int copies = int(std::max<int64_t>(1, (int64_t(96) << 20) / int64_t(w.size())));
  std::vector<std::vector<uint8_t>> cw(size_t(copies), w);
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  std::vector<float> x(size_t(M * K)), y(size_t(M * N));
  for (auto& v : x) v = nd(rng);
  auto plan = qmatmul_plan(f, M, N, K);
  for (int hot = 1; hot >= 0; --hot) {
    if (!hot && copies == 1) continue;
    std::vector<double> ts;
    for (int r = 0; r < reps + 3; ++r) {
      const uint8_t* wp = hot ? w.data() : cw[size_t(r % copies)].data();
      auto t0 = std::chrono::steady_clock::now();
      qmatmul(plan, x.data(), wp, nullptr, y.data());
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 3) ts.push_back(t);
    }
    std::sort(ts.begin(), ts.end());
    double t = ts[ts.size() / 2];
    printf("%s M=%d N=%ld K=%ld threads=%d %s: median %.1f us (of %d), %.2f GB/s of weight bytes\n", argv[2], M, (long)N, (long)K,
           threads, copies == 1 ? "cold (178 MB > L3)" : hot ? "hot (in cache)" : "cold (copies > L3)", t * 1e6, reps, double(w.size()) / t / 1e9);
  }
}
