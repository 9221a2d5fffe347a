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

#include "zenith/batch_slices.h"
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
  // Size in bytes of the value that owns the storage (its reshapes have the same
  // size); not rounded up: the arena slot is arena_align_up(bytes), and 0 for an
  // empty value takes no arena bytes at all.
  size_t bytes = 0;
  size_t offset = 0;  // kArena only: byte offset in the arena, a multiple of kArenaAlign
  int index = -1;     // kInput: graph input position; kConst: node index; kOutput: output buffer slot
  // The lifetime [first, last], both ends inclusive, in node indices. A value read
  // by node i overlaps the outputs of node i, so a node never writes over its own
  // inputs (kernels read inputs while writing outputs).
  int first = -1;  // kArena/kOutput: the node that writes it; kInput/kConst: -1
  int last = -1;   // the last node that reads it, directly or through an alias of it;
                   // == first if nothing reads it; kInput/kConst: -1 if nothing reads it
  // Made and read only inside a batch slice: `bytes` hold one pass's images (batch
  // slice / batch of the value's), which every pass reuses.
  bool per_pass = false;
};

struct MemoryPlan {
  // Per value id: index into `storages`; values with the same index are aliases of
  // one another. -1 for a value no node defines (passes leave dead values behind).
  std::vector<int> storage_of;
  // The graph inputs' storages, in input order, then one per constant and per output
  // of a non-alias node, in node order.
  std::vector<Storage> storages;
  // Per graph output, in g.outputs order: index into `storages` (an output listed
  // twice, or beside a reshape of it, repeats the index: one buffer).
  std::vector<int> output_storage;
  // The arena's size: the highest offset + aligned size placed (a multiple of
  // kArenaAlign; 0 when nothing lives in the arena).
  size_t arena_bytes = 0;
  // The sum of the aligned sizes of the kArena storages: the arena with no reuse
  // (Executable::planned_reused_bytes is the difference).
  size_t arena_unshared_bytes = 0;
  // The number of kOutput storages; their `index`es are 0..n-1 in the order their
  // values first appear in g.outputs.
  int num_output_buffers = 0;
};

// Plans `g` for the concrete shapes `shapes` (per value id). Outputs that are graph
// inputs or constants (possibly through a reshape) keep those storages; the runtime
// copies them out. `slices` (batch_slices.h; disjoint, in node order) run pass by
// pass: a storage written in a slice and read only there is per_pass; any other
// arena storage a slice writes or reads lives across the whole slice (a pass writes
// and reads its own images of it while the others' wait).
MemoryPlan plan_memory(const Graph& g, const std::vector<std::vector<int64_t>>& shapes,
                       const std::vector<BatchSlice>& slices = {});

}  // namespace zenith
