#include "zenith/weight_memory.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "zenith/error.h"
#ifdef __linux__
#include <sys/mman.h>
#endif
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace zenith {

std::shared_ptr<void> alloc_weight_memory(size_t bytes) {
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
  if (bytes >= kLargePageBytes) {
    constexpr size_t kPage = 4096;
    const size_t len = (bytes + kPage - 1) / kPage * kPage, span = len + kLargePageBytes;
    void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) fail_alloc("zenith: out of memory mapping a ", bytes, "-byte weight");
    // Keep the 2 MiB-aligned stretch of len bytes; give back what lies before and after.
    const uintptr_t base = reinterpret_cast<uintptr_t>(m);
    const uintptr_t start = (base + kLargePageBytes - 1) & ~uintptr_t(kLargePageBytes - 1);
    if (start > base) munmap(m, start - base);
    if (base + span > start + len) munmap(reinterpret_cast<void*>(start + len), base + span - start - len);
    void* p = reinterpret_cast<void*>(start);
    madvise(p, len, MADV_HUGEPAGE);  // advice: the memory works without it
    return std::shared_ptr<void>(p, [len](void* q) { munmap(q, len); });
  }
#endif
  // Small weights, other systems, and ASan builds (exact sizes, so overruns show).
  void* p = nullptr;
  if (posix_memalign(&p, 64, std::max<size_t>(bytes, 1)) != 0) p = nullptr;
  if (!p) fail_alloc("zenith: out of memory allocating a ", bytes, "-byte weight");
  return std::shared_ptr<void>(p, std::free);
}

void release_free_heap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace zenith
