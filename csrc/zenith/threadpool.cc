#include "zenith/threadpool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#include "zenith/error.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace zenith {
namespace {
std::atomic<int> g_threads{0};  // 0: not set, OpenMP's own count
}

void set_num_threads(int n) {
  ZENITH_CHECK(n >= 0, "set_num_threads: takes a thread count >= 1 (or 0: OpenMP's count), got ", n);
  g_threads = n;
}
int num_threads() {
  const int n = g_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
#if defined(_OPENMP)
  return std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t per = std::max<int64_t>(min_chunk, 1);
  int64_t chunks = std::min<int64_t>(num_threads(), (n + per - 1) / per);
#if defined(_OPENMP)
  if (chunks <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  std::exception_ptr error;
  std::mutex mu;
#pragma omp parallel num_threads(int(chunks))
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    try {
      fn(n * t / nt, n * (t + 1) / nt);
    } catch (...) {  // exceptions must not leave an OpenMP region
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
#else
  (void)chunks;
  fn(0, n);
#endif
}

}  // namespace zenith
