// The runtime: executes a verified graph on a device through its kernel table.
//
// For each new input signature (shapes and symbol values) it builds a Plan once:
// symbols are bound, attributes resolved to constants, shapes inferred, and every
// intermediate given an offset in one arena by a liveness-based first-fit planner.
// Calls then only patch data pointers and run kernels node by node. Arenas live in
// per-call contexts drawn from a pool, so concurrent calls never share scratch
// memory; outputs get buffers of their own that the caller takes over.
#pragma once
#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zenith/ir.h"
#include "zenith/profiler.h"  // the bindings reach the profiler through this header

namespace zenith {

// The device seam. Only the CPU backend exists; a CUDA backend would add an entry
// with its own allocator and kernel table. Until then CUDA graphs stay in PyTorch.
enum class Device : uint8_t { kCPU };

struct InTensor {
  const void* data;
  DType dtype;
  std::vector<int64_t> shape;  // dense, row-major
};

struct OutTensor {
  std::shared_ptr<void> storage;  // keeps data alive; hand it to the caller's tensor
  void* data;
  DType dtype;
  std::vector<int64_t> shape;
};

struct Plan;
struct NodePlan;
struct BatchSlice;
struct Context;
struct PackedOperand;
struct PreparedOp;
struct MemoryPlan;

class Executable {
 public:
  // `symbol_inputs` names the symbols that arrive as plain integers at run time
  // (PyTorch's SymInt graph inputs), in call order.
  Executable(Graph g, Device device = Device::kCPU, std::vector<std::string> symbol_inputs = {});
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Thread-safe. Throws zenith::Error naming the offending input on a mismatch
  // with the compiled types (count, dtype, rank, static dim, symbol consistency).
  // weight_slot: which set of constant weights this call reads (see set_constant_inputs).
  std::vector<OutTensor> run(const std::vector<InTensor>& inputs, const std::vector<int64_t>& symbol_values,
                             int weight_slot = 0) const;

  // Marks graph inputs (by position) as constant weights: a matmul or addmm whose B
  // operand, or an ungrouped conv2d whose weight, is one of them reads it packed once,
  // on its first call, instead of packing it every call. The packed copy is kept until drop_packed() or until that input
  // arrives at another address. The caller promises the data does not change in
  // place without a drop_packed() (the Python side checks PyTorch's version counters).
  // Copies are kept per weight slot (run's weight_slot, 0..kKeptPerNode-1): one compiled
  // graph serves every instance of a model class (Dynamo reuses it, the weights arriving
  // as inputs), and the caller gives each instance's weights a slot of their own, so two
  // models called in turn each keep theirs; within a slot a weight at another address
  // replaces the slot's copy, as if it were the only one. Regional compilation (each of
  // a model's repeated blocks compiled, one graph for all of them: PyTorch's way to cut
  // compile time) gives every block a slot, so there are enough for the deepest models
  // (126 layers); with 4, a model of 8 compiled blocks repacked every block's weights on
  // every call (8 blocks of a 3x3 conv on 128 channels, 28 x 28, Winograd: 11.0 ms a call
  // against 5.9; 5.3 with the model compiled whole; Intel Xeon 6/167).
  // May be called again, also while other threads run calls; it forgets every packed copy.
  void set_constant_inputs(const std::vector<int>& positions);
  static constexpr int kKeptPerNode = 128;  // weight slots
  void drop_packed();
  size_t packed_bytes() const;  // bytes held by packed weights
  // Whether any packed weight is kept; no lock, so a caller's per-call check stays cheap
  // (may be true a moment longer than packed_bytes() is nonzero, never false while one is kept).
  bool holds_packed() const { return holds_packed_.load(std::memory_order_acquire); }
  // The graph inputs some node reads packed when they are constant (the union over every
  // plan built so far), and a count bumped each time that set grows: the inputs whose
  // in-place changes a caller must watch (the other constant inputs are read in place on
  // every call).
  std::vector<int> packable_inputs() const;
  uint64_t packable_generation() const { return packable_generation_.load(std::memory_order_acquire); }

  const Graph& graph() const { return graph_; }
  // Arena bytes of the plan for the most recently planned signature (0 before a call).
  size_t planned_arena_bytes() const;
  // Of the same plan: arena bytes saved by giving values with disjoint lifetimes the same bytes.
  size_t planned_reused_bytes() const;
  size_t num_plans() const;

 private:
  struct Kept;  // a packed constant weight, per node
  void check_inputs(const std::vector<InTensor>& inputs, const std::vector<int64_t>& syms) const;
  std::shared_ptr<const Plan> plan_for(const std::vector<InTensor>& inputs, const std::vector<int64_t>& syms) const;
  MemoryPlan memory_plan_for(const std::vector<int64_t>& bindings, const Plan& plan) const;
  // The concrete shape of value v under `plan` (a static value's from the graph).
  const std::vector<int64_t>& shape_of(const Plan& plan, int v) const;
  std::vector<std::vector<int64_t>> all_shapes(const Plan& plan) const;
  std::shared_ptr<const Plan> build_plan(std::vector<int64_t> key, const std::vector<int64_t>& bindings,
                                         const std::vector<InTensor>& inputs) const;
  void bind_packed(const std::shared_ptr<const Plan>& plan, const std::vector<InTensor>& inputs, int slot,
                   Context& ctx) const;
  void release_idle_packed() const;
  void run_with(Context& ctx, const std::vector<InTensor>& inputs, const std::vector<int64_t>& syms, int slot,
                std::vector<OutTensor>& result) const;

  Graph graph_;
  Device device_;
  uint64_t serial_;  // names this executable in profile events
  std::vector<int> symbol_inputs_;  // symbol index per integer input
  mutable std::mutex mu_;            // guards plans_, last_plan_, last_built_, free_contexts_, scratch_values_, slices_
  // build_plan's working copy of the graph's values, kept for the next new signature.
  mutable std::vector<Value> scratch_values_;
  // Memory plans of a graph with symbols, per bucket of symbol values (memory_plan_for).
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const MemoryPlan>> mem_plans_;
  std::vector<bool> static_node_;  // per node: constant shapes and attributes
  // Per value: its dims when its type has no symbols (the same under every plan), else null.
  std::vector<std::unique_ptr<const std::vector<int64_t>>> static_dims_;
  // The values whose types have symbols, and per value its index among them (else -1):
  // where Plan::shapes holds its concrete shape.
  std::vector<int> dynamic_values_, dynamic_slot_;
  // The first plan's NodePlans of the static nodes (entries of other nodes empty), shared by every later plan.
  mutable std::shared_ptr<const std::vector<std::shared_ptr<const NodePlan>>> static_plans_;
  // A graph without symbols: its batch slices (batch_slices.h), found by the first plan
  // and kept, so that every plan slices as the static NodePlans it shares were prepared.
  mutable std::shared_ptr<const std::vector<BatchSlice>> slices_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  mutable std::shared_ptr<const Plan> last_plan_;
  // The last plan built for a graph with symbols: build_plan takes its NodePlans where a
  // node's operands are the same (a decode step's projections, one token each call).
  mutable std::shared_ptr<const Plan> last_built_;
  mutable std::vector<std::unique_ptr<Context>> free_contexts_;
  // One context a call takes without a lock when no other call holds it (the
  // single-threaded case); concurrent calls draw from free_contexts_.
  std::unique_ptr<Context> hot_;
  mutable std::atomic<bool> hot_busy_{false};
  mutable std::mutex pack_mu_;        // guards constant_, kept_
  std::vector<bool> constant_;        // per graph input: marked constant by set_constant_inputs
  mutable std::vector<std::vector<Kept>> kept_;  // per node, at most one copy per weight slot
  // Bumped whenever packed weights are dropped or the constant set changes: a context's
  // cached packed pointers are valid only while it is unchanged.
  mutable std::atomic<uint64_t> pack_generation_{1};
  mutable std::atomic<bool> holds_packed_{false};  // set when kept_ gains a pack, cleared with kept_
  mutable std::vector<bool> packable_;                      // per graph input (guarded by mu_)
  mutable std::atomic<uint64_t> packable_generation_{0};  // bumped when packable_ grows
};

}  // namespace zenith
