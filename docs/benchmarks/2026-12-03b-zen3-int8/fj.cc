#include <chrono>
#include <cstdio>
#include <atomic>
#include "zenith/threadpool.h"
using namespace zenith;
int main() {
  set_num_threads(2);
  std::atomic<long> sink{0};
  for (int round = 0; round < 3; ++round) {
    const int n = 20000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) parallel_for(2, 1, [&](int64_t lo, int64_t hi) { sink += hi - lo; });
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    // with ~20 us of work per thread between regions
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < n / 10; ++i) parallel_for(2, 1, [&](int64_t lo, int64_t hi) { volatile double x = 1; for (int k = 0; k < 20000; ++k) x = x * 1.0000001; sink += hi - lo; });
    double us2 = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count() / (n / 10);
    std::printf("empty region %.2f us; region with ~%s work %.2f us\n", us, "20k-mul", us2);
  }
  auto t2 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2000; ++i) { volatile double x = 1; for (int k = 0; k < 20000; ++k) x = x * 1.0000001; }
  std::printf("the work alone: %.2f us\n", std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t2).count() / 2000);
}
