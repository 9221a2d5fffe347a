// Access patterns of the decode kernels, cold (a 384 MiB buffer, 2 threads each on a
// contiguous half), with next to no compute: GB/s.
#include <immintrin.h>
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <vector>
#include <algorithm>
static const size_t kBytes = size_t(384) << 20;
volatile int sink;
template <class F> double run(const char* name, uint8_t* buf, F f) {
  std::vector<double> ts;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    int s = 0;
#pragma omp parallel num_threads(2) reduction(+ : s)
    {
      int t = omp_get_thread_num();
      size_t half = kBytes / 2;
      s += f(buf + t * half, half);
    }
    sink = s;
    ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  double gb = kBytes / ts[3] / 1e9;
  printf("%-40s %6.1f GB/s\n", name, gb);
  return gb;
}
int main() {
  uint8_t* buf = (uint8_t*)aligned_alloc(1 << 21, kBytes);
  memset(buf, 1, kBytes);
  run("sequential 32B loads", buf, [](const uint8_t* p, size_t n) {
    __m256i acc = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 32) acc = _mm256_add_epi8(acc, _mm256_loadu_si256((const __m256i*)(p + i)));
    return _mm256_extract_epi32(acc, 0);
  });
  for (int rows : {4, 8}) for (int pf : {0, 1, 2}) for (int rb : {2052, 1152, 8196}) {
    int step = rows == 4 ? 32 : 16;
    char name[80];
    snprintf(name, sizeof name, "%d rows x %dB, rb %d, %s", rows, step, rb, pf == 0 ? "no prefetch" : pf == 1 ? "pf next group" : "pf 2 groups");
    run(name, buf, [&](const uint8_t* p, size_t n) {
      __m256i acc = _mm256_setzero_si256();
      size_t group = size_t(rows) * rb;
      for (size_t g = 0; g + group <= n; g += group) {
        const uint8_t* w = p + g;
        uintptr_t ahead = uintptr_t(w) + group * (pf == 2 ? 2 : 1);
        for (int b = 0; b * step + step <= rb - 4; b++) {
          if (pf && (b * step) % 64 == 0)
            for (int i = 0; i < rows; ++i) __builtin_prefetch((const void*)(ahead + i * rb + b * step), 0, 3);
          for (int i = 0; i < rows; ++i) {
            const uint8_t* q = w + i * rb + 4 + b * step;
            __m256i v = step == 32 ? _mm256_loadu_si256((const __m256i*)q) : _mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)q));
            acc = _mm256_add_epi8(acc, v);
          }
        }
      }
      return _mm256_extract_epi32(acc, 0);
    });
  }
}
