// Memory for weights that kernels stream from DRAM once per call: a decode step reads
// every weight of the model once, 4 KiB page after 4 KiB page, each a TLB miss. Linux
// backs the 2 MiB-aligned stretches of this memory with 2 MiB pages where it can
// (madvise MADV_HUGEPAGE: THP's "madvise" mode, the common default, gives them only to
// memory that asks). Intel Xeon 6/167, 2 threads, weights cold: a q4_0 5632 x 2048
// GEMV 1.27x as fast; TinyLlama-1.1B decode of 32 tokens, one process, 8 interleaved
// runs against a deepcopy of the model on 4 KiB pages: int4 1.20x the tokens/s, int8
// 1.11x.
#pragma once
#include <cstddef>
#include <memory>

namespace zenith {

// Bytes at least 2 MiB that are worth the mapping (smaller ones hold no whole 2 MiB page).
constexpr size_t kLargePageBytes = size_t(2) << 20;

// `bytes` of writable memory, 64-byte aligned (2 MiB-aligned from kLargePageBytes on:
// its own mapping, asked for 2 MiB pages, its last partial page in 4 KiB ones, so at
// most 4 KiB beyond `bytes`); freed by the deleter. Throws zenith::Error when out of
// memory. Where madvise fails or is not Linux's, the memory is the same, in small pages.
std::shared_ptr<void> alloc_weight_memory(size_t bytes);

// Returns the heap's free memory to the system (glibc's malloc_trim; nothing elsewhere):
// for after a model's weights were made in temporaries and copied into weight memory,
// whose freed pages glibc would otherwise keep.
void release_free_heap();

}  // namespace zenith
