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
template <class F> void run(const char* name, uint8_t* buf, F f) {
  std::vector<double> ts;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    int s = 0;
#pragma omp parallel num_threads(2) reduction(+ : s)
    { int t = omp_get_thread_num(); size_t half = kBytes / 2; s += f(buf + t * half, half); }
    sink = s;
    ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  printf("%-44s %6.1f GB/s (best %.1f)\n", name, kBytes / ts[3] / 1e9, kBytes / ts[0] / 1e9);
}
int main() {
  uint8_t* buf = (uint8_t*)aligned_alloc(1 << 21, kBytes);
  memset(buf, 1, kBytes);
  for (int S : {1, 2, 4, 8, 16}) for (int unroll : {1, 2}) {
    char name[80]; snprintf(name, sizeof name, "%d streams, %d x 32B per stream step", S, unroll);
    run(name, buf, [&](const uint8_t* p, size_t n) {
      __m256i acc[16];
      for (int s = 0; s < 16; ++s) acc[s] = _mm256_setzero_si256();
      size_t part = n / S, step = 32 * unroll;
      for (size_t i = 0; i + step <= part; i += step)
        for (int s = 0; s < S; ++s)
          for (int u = 0; u < unroll; ++u)
            acc[s] = _mm256_add_epi8(acc[s], _mm256_loadu_si256((const __m256i*)(p + s * part + i + 32 * u)));
      for (int s = 1; s < 16; ++s) acc[0] = _mm256_add_epi8(acc[0], acc[s]);
      return _mm256_extract_epi32(acc[0], 0);
    });
  }
}
