#include "zenith/buffer_cache.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "zenith/error.h"
#include "zenith/planner.h"

namespace zenith {

namespace {
constexpr size_t kPage = 4096;

struct Cache {
  std::mutex mu;
  std::list<std::pair<size_t, void*>> held;  // (bytes, buffer), oldest first
  size_t bytes = 0;
  size_t limit = 0;
  Cache() {
#ifndef __SANITIZE_ADDRESS__
    const char* v = std::getenv("ZENITH_OUTPUT_CACHE_MB");
    limit = (v && *v ? size_t(std::max(0L, std::strtol(v, nullptr, 10))) : size_t(512)) << 20;
#endif
  }
};
// Never destroyed: a tensor may free its buffer after static destructors have run.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

void give_back(void* p, size_t bytes) {
  Cache& c = cache();
  std::vector<void*> evicted;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (bytes > c.limit) {
      evicted.push_back(p);
    } else {
      c.held.emplace_back(bytes, p);
      c.bytes += bytes;
      while (c.bytes > c.limit) {
        evicted.push_back(c.held.front().second);
        c.bytes -= c.held.front().first;
        c.held.pop_front();
      }
    }
  }
  for (void* q : evicted) std::free(q);
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
    for (auto it = c.held.rbegin(); it != c.held.rend(); ++it)
      if (it->first == size) {
        p = it->second;
        c.bytes -= size;
        c.held.erase(std::next(it).base());
        break;
      }
  }
  if (!p) p = std::aligned_alloc(kPage, size);
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

void release_buffer_cache() {
  Cache& c = cache();
  std::list<std::pair<size_t, void*>> held;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    held.swap(c.held);
    c.bytes = 0;
  }
  for (auto& h : held) std::free(h.second);
}

}  // namespace zenith
