// Batch slices: a run of nodes that computes every image of a batch on its own (convs,
// pools, layout conversions) is executed a few images at a time, each pass running the
// whole run, instead of node by node over the whole batch.
//
// Why: at batch 8 the first stages of a CNN make tensors of 13-26 MB (ResNet-50's stem
// output, its layer 1's 256-channel maps, MobileNet V2's stem output), so a node's
// operands outgrow the last-level cache and each node reads its input from memory and
// writes its output there, while its filters are small. One or two images at a time
// keep a pass's tensors (3-7 MB) in cache and read the filters once a pass. Zen 5 (L3
// 32 MiB), 2 threads, frozen, in-process A/Bs against no slicing (2026-12-05b-zen5-
// batch-slices in docs/benchmarks): ResNet-50 b8 0.971-0.989 of the time (its stem to
// layer 2 one image a pass; stem to layer 2's first block alone 0.949-0.985; on through
// layer 3's first block, whose filters are 0.5-2 MB, the gain was gone, and through
// layer 3 it cost 4.7%), ResNet-18 b8 0.912-0.926, MobileNet V2 b8 0.979 (stem and first
// block, two images a pass).
//
// Which nodes: a run of consecutive per-image nodes on one batch, from the first to the
// last worth it: one with a batched operand (an input or output over the whole batch)
// over a quarter of the cache, whose filters read once an image add at most an eighth
// of its operands' bytes. Images a pass: the most below the batch that divide it and
// whose operands of any of those nodes take at most a quarter of the cache. ResNet-50
// b8 on a 32 MiB L3: nodes 0-24 (up to layer 3, whose first conv reads 13 MB with 0.5
// MB of filters and whose 3x3 convs have 2.4 MB), one image a pass (up to 7.2 MB an
// image); MobileNet V2 b8: nodes 0-1, two images.
//
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "zenith/ir.h"

namespace zenith {

struct BatchSlice {
  int first = 0, last = 0;  // the run's nodes, both ends inclusive
  int64_t batch = 0;        // N: dim 0 of every batched operand of the run
  int64_t slice = 0;        // S: images a pass; divides N, less than N
};

// Whether node n computes each image of dim 0 from that image alone, and then which of
// its inputs carry the batch in dim 0 (the others are weights, read whole every pass).
bool per_image_node(const Node& n, std::vector<bool>* batched_inputs);

// The runs of a graph with these concrete shapes (per value id) worth slicing, for a
// last-level cache of `cache` bytes (the rule above); none when cache is 0.
// batch_slices.cc.
std::vector<BatchSlice> find_batch_slices(const Graph& g, const std::vector<std::vector<int64_t>>& shapes,
                                          size_t cache);

// The cache size the runtime passes: the last-level cache's as sysfs reports it (32 MiB
// if unknown); ZENITH_BATCH_SLICE_CACHE overrides it (bytes, or K / M / G; 0 turns
// slicing off; anything else is an error).
size_t batch_slice_cache();

}  // namespace zenith
