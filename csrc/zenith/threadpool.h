// One process-wide pool of worker threads for kernels. Workers sleep on a
// condition variable between jobs (no spinning, so an idle Zenith burns no core).
// The Python layer sizes it from torch.get_num_threads(), so Zenith and PyTorch
// never run more threads than the user asked for.
#pragma once
#include <cstdint>
#include <functional>

namespace zenith {

void set_num_threads(int n);  // n >= 1; 1 disables the pool
int num_threads();

// Runs fn(begin, end) over [0, n) split into contiguous chunks, one per thread,
// and returns when all are done. If the pool is busy (another caller's job, or a
// nested call from inside a job), runs fn(0, n) on the calling thread instead.
// `min_chunk` keeps tiny loops serial.
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace zenith
