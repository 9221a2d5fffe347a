#include "zenith/buffer_cache.h"

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "zenith/error.h"
#include "zenith/planner.h"

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
#ifndef __SANITIZE_ADDRESS__
    size_t mb = 512;
    if (const char* v = std::getenv("ZENITH_OUTPUT_CACHE_MB"); v && *v) {
      char* end = nullptr;
      const long long n = std::strtoll(v, &end, 10);
      if (end != v) mb = size_t(std::clamp<long long>(n, 0, 1 << 20));  // (unparsable: the default)
    }
    limit = mb << 20;
#endif
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
  // The oldest buffer, taken out (held not empty). Under mu.
  void* take_oldest() {
    auto e = held.begin();
    auto& v = by_size[e->bytes];
    v.erase(std::find(v.begin(), v.end(), e));
    void* p = e->p;
    bytes -= e->bytes;
    held.erase(e);
    return p;
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
  if (p) std::free(p);
  for (;;) {  // evict the oldest until within the limit, freeing outside the lock
    void* q = nullptr;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.bytes > c.limit) q = c.take_oldest();
    }
    if (!q) break;
    std::free(q);
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
  for (auto& h : held) std::free(h.p);
  return bytes;
}

}  // namespace zenith
