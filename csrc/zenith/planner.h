// The memory planner: where each value of a graph lives during one call, for one set
// of concrete shapes. Graph inputs and constants stay in their callers' memory;
// `reshape` (op trait kAlias) shares its input's storage; graph outputs get buffers
// of their own per call; every other value gets an offset in one arena. Two arena
// values share bytes only if their lifetimes, extended through aliases, do not
// overlap (first-fit, largest first).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "zenith/ir.h"

namespace zenith {

constexpr size_t kArenaAlign = 64;  // every arena offset and buffer is aligned to this
inline size_t arena_align_up(size_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

// Where one value's bytes live (several values share one Storage through aliases).
struct Storage {
  enum Kind : uint8_t {
    kArena,   // an offset in the call's arena
    kInput,   // a graph input's memory, used in place
    kConst,   // a constant node's data, used in place
    kOutput,  // a buffer of its own per call, handed to the caller
  } kind = kArena;
  size_t bytes = 0;   // size of the value (not rounded up to the alignment)
  size_t offset = 0;  // kArena only: byte offset in the arena, a multiple of kArenaAlign
  int index = -1;     // kInput: graph input position; kConst: node index; kOutput: output buffer slot
  int first = -1;     // node that writes it (kArena/kOutput: its producer)
  int last = -1;      // last node that reads it, directly or through an alias of it
};

struct MemoryPlan {
  std::vector<int> storage_of;      // per value id: index into storages
  std::vector<Storage> storages;
  std::vector<int> output_storage;  // per graph output: index into storages
  size_t arena_bytes = 0;           // the arena's size: the highest offset + size placed
  size_t arena_unshared_bytes = 0;  // what the arena values would take with no reuse
  int num_output_buffers = 0;       // kOutput storages
};

// Plans `g` for the concrete shapes `shapes` (per value id). Outputs that are graph
// inputs or constants (possibly through a reshape) keep those storages; the runtime
// copies them out.
MemoryPlan plan_memory(const Graph& g, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace zenith
