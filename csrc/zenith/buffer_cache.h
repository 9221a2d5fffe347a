// Buffers for what a graph call hands out (its outputs) and the float32 staging buffers
// of its float16 / bfloat16 tensors, kept for reuse once their last owner lets go. A training step's outputs (every
// parameter's gradient, the activations the backward reads) are freed by PyTorch
// before the next step asks for the same sizes again. Freed with std::free, glibc gave
// the large ones back to the system (munmap, or trimming the heap's top), and each step
// faulted their pages in again, the kernel zeroing every one: ResNet-18's training step
// at batch 8, 112 px, in a process running only Zenith, took 10.6K page faults (41 MiB)
// a step, ~3.5% of its samples in the kernel's fault path under perf.
//
// Buffers of kMinCachedBytes or more (sizes rounded up to 4 KiB) return to the cache
// from any thread; a request takes the most recently returned buffer of its exact size,
// else allocates (and, out of memory, frees the cache and tries again). The cache holds
// at most ZENITH_OUTPUT_CACHE_MB (default 512; 0: no cache) for the process's life and
// evicts its oldest buffers first; PyTorch's own allocations cannot take it back, so
// zenith.empty_cache() is there for a process done with a model. Under ASan a cached
// buffer is poisoned, and a buffer handed out poisoned past the bytes asked for, so that
// a kernel running past an output, or touching one after its owner let go, is reported.
#pragma once
#include <cstddef>
#include <memory>

namespace zenith {

constexpr size_t kMinCachedBytes = size_t(64) << 10;

// `bytes` (0 allowed) of memory, 64-byte aligned, freed by the deleter: to the cache
// where it takes them. Throws zenith::Error when out of memory.
std::shared_ptr<void> cached_buffer(size_t bytes);
// The same, never cached (memory held as long as its owner lives: an arena).
std::shared_ptr<void> aligned_buffer(size_t bytes);

// What the cache holds now, in bytes, and its limit.
size_t buffer_cache_bytes();
size_t buffer_cache_limit();
// Frees every buffer the cache holds (buffers in use return to it later as usual) and
// returns their bytes.
size_t release_buffer_cache();

}  // namespace zenith
