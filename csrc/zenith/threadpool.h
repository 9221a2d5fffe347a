// Kernel parallelism. Zenith runs its parallel loops on OpenMP, the same runtime
// (libgomp, one copy per process) that PyTorch's CPU ops use, so Zenith and PyTorch
// share one team of worker threads instead of competing for the cores: when eager
// ops and Zenith graphs alternate (fallbacks, benchmarks), PyTorch's threads that
// are still spinning after an op are the very threads Zenith's next loop runs on.
// Until set_num_threads is called, the count is OpenMP's for the calling thread
// (omp_get_max_threads): OMP_NUM_THREADS, else the CPUs this process may run on, or what
// omp_set_num_threads (torch.set_num_threads calls it) set on that thread. The Python
// layer sets it from torch.get_num_threads() at each call.
#pragma once
#include <cstdint>
#include <functional>

namespace zenith {

// For the whole process. n >= 1 (1 runs everything on the calling thread); 0 returns to
// the default above. Negative: zenith::Error.
void set_num_threads(int n);
int num_threads();

// Runs fn(begin, end) over [0, n) split into contiguous chunks, one per thread,
// and returns when all are done; the first exception thrown by a chunk is rethrown.
// Inside another parallel_for (nested) it runs fn(0, n) on the calling thread.
// `min_chunk` keeps tiny loops serial.
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace zenith
