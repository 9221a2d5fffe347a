// quantize_act_row_avx2 over x [128, K] just written: by this thread (own), or by another core (other),
// or half each by column split (half: the GEMM's split), timed on thread 0 only.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include <pthread.h>
#include "zenith/kernels/quant_formats.h"
using namespace zenith::quant;
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); pthread_setaffinity_np(pthread_self(), sizeof(s), &s); }
int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoll(argv[1]) : 1536, M = 128;
  const int mode = argc > 2 ? atoi(argv[2]) : 0;  // 0 own, 1 other writes all, 2 column halves, 3 other reads q/d/s16 (as the GEMM does), 4: 3 + prefetchw
  std::vector<float> x(size_t(M * K));
  std::vector<int8_t> q(size_t(M * K)); std::vector<float> d(size_t(M * K / 32)); std::vector<int16_t> s(size_t(M * K / 16));
  std::atomic<int> phase{0};
  auto write = [&](int64_t c0, int64_t c1, float v) {
    for (int64_t m = 0; m < M; ++m) for (int64_t k = c0; k < c1; ++k) x[size_t(m * K + k)] = v + float((m * 7 + k) % 13) * 0.1f;
  };
  const int iters = 400;
  std::thread other([&] {
    pin(1);
    for (int i = 0; i < iters; ++i) {
      while (phase.load() != 2 * i + 1) {}
      if (mode == 1) write(0, K, float(i)); else if (mode == 2) write(K / 2, K, float(i));
      else if (mode >= 3) { volatile int64_t acc = 0; int64_t a2 = 0;
        for (size_t j = 0; j < q.size(); j += 64) a2 += q[j];
        for (size_t j = 0; j < d.size(); j += 16) a2 += int64_t(d[j]);
        for (size_t j = 0; j < s.size(); j += 32) a2 += s[j];
        acc = a2; (void)acc; }
      phase.store(2 * i + 2);
    }
  });
  pin(0);
  double tot = 0;
  for (int i = 0; i < iters; ++i) {
    if (mode == 0 || mode >= 3) write(0, K, float(i)); else if (mode == 2) write(0, K / 2, float(i));
    phase.store(2 * i + 1);
    while (phase.load() != 2 * i + 2) {}
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t m = 0; m < M; ++m) {
      if (mode == 4) for (int64_t j = 0; j < K; j += 64) __builtin_prefetch(q.data() + (m + 1) * K + j, 1);
      quantize_act_row_avx2(x.data() + m * K, K, 32, q.data() + m * K, d.data() + m * K / 32, s.data() + m * K / 16, 0.0f, 127);
    }
    tot += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  other.join();
  std::printf("K %ld mode %d: %.3f ns a value\n", (long)K, mode, tot / iters * 1e9 / double(M * K));
}
