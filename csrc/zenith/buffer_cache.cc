#include "zenith/buffer_cache.h"

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "zenith/error.h"
#include "zenith/planner.h"
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define ZENITH_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define ZENITH_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define ZENITH_POISON(p, n) ((void)(p), (void)(n))
#define ZENITH_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace zenith {

namespace {
constexpr size_t kPage = 4096;

struct Cache {
  struct Entry {
    size_t bytes;
    void* p;
  };
  std::mutex mu;
  std::list<Entry> held;  // oldest first
  // each size's entries in `held`, newest last
  std::unordered_map<size_t, std::vector<std::list<Entry>::iterator>> by_size;
  size_t bytes = 0;
  size_t limit = 0;
  Cache() {
    size_t mb = 512;
    if (const char* v = std::getenv("ZENITH_OUTPUT_CACHE_MB"); v && *v) {
      char* end = nullptr;
      const long long n = std::strtoll(v, &end, 10);
      if (end != v) mb = size_t(std::clamp<long long>(n, 0, 1 << 20));  // (unparsable: the default)
    }
    limit = mb << 20;
  }
  // The newest buffer of `size` bytes, taken out, or null. Under mu.
  void* take(size_t size) {
    auto it = by_size.find(size);
    if (it == by_size.end() || it->second.empty()) return nullptr;
    auto e = it->second.back();
    it->second.pop_back();
    void* p = e->p;
    bytes -= e->bytes;
    held.erase(e);
    return p;
  }
  // The oldest entry, taken out (held not empty). Under mu.
  Entry take_oldest() {
    auto e = held.begin();
    auto& v = by_size.find(e->bytes)->second;
    v.erase(std::find(v.begin(), v.end(), e));
    const Entry out = *e;
    bytes -= e->bytes;
    held.erase(e);
    return out;
  }
};
// Never destroyed: a tensor may free its buffer after static destructors have run.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

// The deleter of cached buffers (from any thread; nanobind's capsule destructors are
// noexcept, so nothing here may throw: a buffer the cache cannot record is freed).
void give_back(void* p, size_t bytes) noexcept {
  Cache& c = cache();
  ZENITH_POISON(p, bytes);  // (under ASan: a read or write of a cached buffer is reported)
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (bytes <= c.limit) {
      try {
        c.held.push_back({bytes, p});
        try {
          c.by_size[bytes].push_back(std::prev(c.held.end()));
        } catch (...) {
          c.held.pop_back();
          throw;
        }
        c.bytes += bytes;
        p = nullptr;
      } catch (...) {  // (out of memory: p is freed below)
      }
    }
  }
  if (p) {
    ZENITH_UNPOISON(p, bytes);
    std::free(p);
  }
  for (;;) {  // evict the oldest until within the limit, freeing outside the lock
    Cache::Entry e{0, nullptr};
    {
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.bytes > c.limit) e = c.take_oldest();
    }
    if (!e.p) break;
    ZENITH_UNPOISON(e.p, e.bytes);
    std::free(e.p);
  }
}
}  // namespace

std::shared_ptr<void> aligned_buffer(size_t bytes) {
#ifdef __SANITIZE_ADDRESS__
  // The exact size, so that ASan sees a kernel run past an output or the arena's end
  // (aligned_alloc wants a multiple of the alignment, which would hide up to 63 bytes).
  void* p = nullptr;
  if (posix_memalign(&p, kArenaAlign, std::max<size_t>(bytes, 1)) != 0) p = nullptr;
#else
  void* p = std::aligned_alloc(kArenaAlign, arena_align_up(std::max<size_t>(bytes, 1)));
#endif
  if (!p) fail_alloc("zenith runtime: out of memory allocating ", bytes, " bytes");
  return std::shared_ptr<void>(p, std::free);
}

std::shared_ptr<void> cached_buffer(size_t bytes) {
  Cache& c = cache();
  if (bytes < kMinCachedBytes || c.limit == 0) return aligned_buffer(bytes);
  const size_t size = (bytes + kPage - 1) / kPage * kPage;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    p = c.take(size);
  }
  if (!p) p = std::aligned_alloc(kPage, size);
  if (!p && buffer_cache_bytes() > 0) {  // out of memory with buffers held: give them back, try again
    release_buffer_cache();
    p = std::aligned_alloc(kPage, size);
  }
  if (!p) fail_alloc("zenith runtime: out of memory allocating ", bytes, " bytes");
  // The caller's bytes usable, the rounding past them poisoned under ASan (a kernel
  // running past an output is reported, as with an exact-size buffer).
  ZENITH_UNPOISON(p, bytes);
  ZENITH_POISON(static_cast<char*>(p) + bytes, size - bytes);
  // (should the control block's allocation throw, shared_ptr calls the deleter)
  return std::shared_ptr<void>(p, [size](void* q) { give_back(q, size); });
}

size_t buffer_cache_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.bytes;
}

size_t buffer_cache_limit() { return cache().limit; }

size_t release_buffer_cache() {
  Cache& c = cache();
  std::list<Cache::Entry> held;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    held.swap(c.held);
    c.by_size.clear();
    bytes = c.bytes;
    c.bytes = 0;
  }
  for (auto& h : held) {
    ZENITH_UNPOISON(h.p, h.bytes);
    std::free(h.p);
  }
  return bytes;
}

}  // namespace zenith
